"""cudaleak's `sitecustomize`: starts the reader of the frameworks' own counts, then hands over
to the program's own `sitecustomize`.

`cudaleak run` writes this file as `sitecustomize.py`, with `_cudaleak_bootstrap.py`
(python/cudaleak/_bootstrap.py) beside it, into a folder it puts first on PYTHONPATH, so
Python's `site` imports it at start-up. It starts the bootstrap, takes its folder off
`sys.path` (the program sees the path it would have had; a child Python still finds the folder
through PYTHONPATH), and imports the next `sitecustomize` on the path, as coverage's subprocess
support and `ddtrace-run` do. Nothing of ours escapes or prints (but with CUDALEAK_DEBUG set);
what the program's own `sitecustomize` raises goes to `site`, which reports it as it would have.
Standard library only, Python 3.8 and later: the CLI embeds this file whole.

CUDALEAK_DEBUG is spelled here, as in the bootstrap, not asked of the CLI (the program under
test must not start a process for it); python/tests/test_names.py holds it to the CLI's name.
"""


def _cudaleak_start_and_chain():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import _cudaleak_bootstrap

        _cudaleak_bootstrap.start()
    except Exception:
        if os.environ.get("CUDALEAK_DEBUG", "") not in ("", "0"):
            import traceback

            traceback.print_exc()

    real = os.path.realpath(here)

    def ours(entry):
        return bool(entry) and (
            os.path.abspath(entry) == here or os.path.realpath(entry) == real
        )

    for entry in [e for e in sys.path if isinstance(e, str) and ours(e)]:
        sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)

    # The next `sitecustomize` on the path, if there is one, takes our place in sys.modules.
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError as e:
        if e.name != "sitecustomize":
            raise  # the program's own failed: `site` says so, as without us
        if me is not None:
            sys.modules["sitecustomize"] = me


if __name__ == "sitecustomize":
    _cudaleak_start_and_chain()
