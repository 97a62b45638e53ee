"""cudaleak: find CUDA memory leaks, with the line that allocated them.

In code (docs/python-api.md):

    import cudaleak
    with cudaleak.track() as t:
        train_one_epoch(model, loader)
    print(t.report())
    t.assert_no_leaks("1 MiB")

In IPython or Jupyter: `%load_ext cudaleak`, then `%%cudaleak` on a cell. From the shell:
`cudaleak run -- python train.py` (the `cudaleak` command installed with this package). With
pytest: `pytest --cudaleak` (docs/pytest.md).
"""

from .api import (
    CudaleakError,
    Diff,
    Growth,
    Leak,
    LeakError,
    Snapshot,
    Tracker,
    diff,
    snapshot,
    track,
)

__all__ = [
    "CudaleakError",
    "Diff",
    "Growth",
    "Leak",
    "LeakError",
    "Snapshot",
    "Tracker",
    "diff",
    "snapshot",
    "track",
    "load_ipython_extension",
]


def load_ipython_extension(ipython):
    """`%load_ext cudaleak`: the `%%cudaleak` cell magic and `%cudaleak_report`."""
    from . import _ipython

    _ipython.load(ipython)
