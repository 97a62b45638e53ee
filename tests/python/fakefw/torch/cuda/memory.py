"""The fake's `torch.cuda.memory`: the allocation record, as PyTorch 2.1+ spells it."""

from . import _allocator


def _record_memory_history(
    enabled="all", context="all", stacks="all", max_entries=1 << 62, device=None
):
    if enabled not in (None, "state", "all"):
        raise ValueError("enabled must be None, 'state' or 'all', not %r" % (enabled,))
    if context not in (None, "state", "alloc", "all"):
        raise ValueError("context must be None, 'state', 'alloc' or 'all', not %r" % (context,))
    if stacks not in ("python", "all"):
        raise ValueError("stacks must be 'python' or 'all', not %r" % (stacks,))
    _allocator.record_history(enabled is not None and context is not None)


def _snapshot(device=None):
    # PyTorch's first snapshot in a process can take seconds; FAKE_TORCH_SNAPSHOT_S plays that.
    import os
    import time

    time.sleep(float(os.environ.get("FAKE_TORCH_SNAPSHOT_S", "0")))
    return _allocator.snapshot()
