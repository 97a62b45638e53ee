"""What the frameworks in this process say they hold, for a window of the program (a tracked
block, a notebook cell, a test): shared by the Python API and the pytest plugin. Only frameworks
the program imported are touched; none is imported here.

PyTorch's caching allocator hides a tensor kept inside a segment that was live before the
window (the pool had room; the driver sees nothing). PyTorch's own count
(`torch.cuda.memory_allocated()`) sees it, and its allocator's record of live blocks
(`_record_memory_history`, state only, Python stacks) names the line. The blocks are handed to
the shim as a framework record of the window's dump (docs/dump-format.md, "frameworks"), and the
CLI reports them with the rest: no finding is worded here.
"""

import json
import os
import sys
import time

from . import _bootstrap

# Whether this process turned PyTorch's record on (None: not tried; False: PyTorch refused).
_recording = None


def torch_in_use(started=True):
    """PyTorch, when the program imported it, CUDA is initialised and the native caching
    allocator serves the tensors; else None. (With `backend:cudaMallocAsync` every tensor is
    its own driver allocation, which the shim sees.) STARTED=False: also before CUDA is
    initialised, when nothing is allocated yet and the backend is what the allocator variable
    says (asking PyTorch could initialise CUDA, which a program that forks later must not find
    done)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            if started:
                return None
            conf = ",".join(os.environ.get(v, "") for v in ALLOC_CONF_VARS).replace(" ", "")
            return None if "backend:cudaMallocAsync" in conf else torch
        if torch.cuda.get_allocator_backend() != "native":
            return None
    except Exception:  # noqa: BLE001 - a framework's failure is not the program's
        return None
    return torch


# The variables PyTorch reads its allocator's settings from (the second one since 2.8).
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def allocated(torch):
    """PyTorch's count of bytes its live tensors hold, over every device."""
    try:
        return sum(torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001
        return 0


def reserved(torch):
    """What PyTorch's caching allocator holds from the driver (its segments), over every device."""
    try:
        return sum(torch.cuda.memory_reserved(d) for d in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001
        return None


def count():
    """PyTorch's count of allocated bytes, or None when it does not serve tensors here."""
    torch = torch_in_use()
    return None if torch is None else allocated(torch)


def start_record(torch):
    """Turns PyTorch's record of live blocks on (once per process); whether it is on."""
    global _recording
    if _recording is None:
        try:
            torch.cuda.memory._record_memory_history(
                enabled="state", context="alloc", stacks="python"
            )
            _recording = True
        except Exception:  # noqa: BLE001
            _recording = False
    return _recording


def live_blocks(torch):
    """PyTorch's snapshot of its segments, or None when it cannot be read."""
    try:
        return torch.cuda.memory._snapshot()
    except Exception:  # noqa: BLE001
        return None


def _bootstrap_recording():
    """Whether the bootstrap of `cudaleak run` turned PyTorch's record on (it saw growth)."""
    boot = sys.modules.get("_cudaleak_bootstrap")
    sampler = getattr(boot, "_sampler", None)
    return getattr(sampler, "record_since", None) is not None and not getattr(
        sampler, "record_note", None
    )


def block_addresses(snapshot):
    return {
        b.get("address")
        for seg in (snapshot or {}).get("segments", ())
        for b in seg.get("blocks", ())
        if b.get("state") == "active_allocated"
    }


class TorchWindow:
    """PyTorch's count at a window's start, to tell at its end what the window kept."""

    def __init__(self, before, seen, since_ms, note, reserved_before=None):
        self.before = before
        self.reserved_before = reserved_before
        self.seen = seen
        self.since_ms = since_ms
        self.note = note
        #: The addresses of the blocks the last `records` named.
        self.addresses = set()

    @classmethod
    def start(cls, read_live=None):
        """At a window's start: None when PyTorch does not serve tensors from its caching
        allocator here. Turns PyTorch's record on the first time. READ_LIVE: whether to read the
        blocks live now, so that none of them is blamed on the window (None: when the record
        was on before, so they may carry frames; blocks made before it have none)."""
        torch = torch_in_use(started=False)
        if torch is None:
            return None
        was_on = _recording is True or _bootstrap_recording()
        note = None
        if not start_record(torch):
            note = (
                "PyTorch's allocation record could not be turned on, so no line is known; "
                "`cudaleak run --exact-pools` gives each tensor its own driver allocation"
            )
        if read_live is None:
            read_live = was_on
        since_ms = int(time.time() * 1000)
        if not torch.cuda.is_initialized():
            return cls(0, set(), since_ms, note, 0)  # nothing allocated yet
        seen = block_addresses(live_blocks(torch)) if read_live else set()
        return cls(allocated(torch), seen, since_ms, note, reserved(torch))

    def pool_grew_by(self, nbytes):
        """Whether PyTorch's segments grew by exactly NBYTES since the start: then blocks of that
        many bytes that the driver saw allocated are PyTorch's own new segments (the pool's
        cache), and, if its count did not grow, they hold no tensor the window kept."""
        growth = self.pool_growth()
        return growth is not None and growth == nbytes

    def pool_growth(self):
        """How much PyTorch's segments grew since the start, None when it cannot be read."""
        torch = torch_in_use()
        if torch is None or self.reserved_before is None:
            return None
        now = reserved(torch)
        return None if now is None else now - self.reserved_before

    def grown(self):
        """How much PyTorch's count rose since the start (0 when it cannot be read now), cuBLAS's
        workspaces given back first, as they were at the start (`start_window`)."""
        torch = torch_in_use()
        if torch is None:
            return 0
        _clear_workspaces(torch)
        return allocated(torch) - self.before

    def records(self, shim, mark, limit=0, owned=None):
        """At the window's end (the pools emptied): the framework records (a list for the
        shim's dump) of the tensors the window left in segments that were live before it, or
        None when PyTorch's count did not grow by more than LIMIT. OWNED(block, frames), when
        given, says which blocks are the window's (the pytest plugin: made below the test's
        own function)."""
        self.addresses = set()
        grown = self.grown()
        if grown <= limit:
            return None
        record = {
            "framework": "torch",
            "since_unix_ms": self.since_ms,
            "unix_ms": int(time.time() * 1000),
            "groups": [],
        }
        explained = 0  # bytes in new driver blocks: reported as those
        if self.note is None:
            snapshot = live_blocks(torch_in_use())
            if snapshot is None:
                self.note = "PyTorch's allocation record could not be read"
            else:
                new_blocks = _driver_blocks_since(shim, mark)

                def skip(segment, block):
                    nonlocal explained
                    address = block.get("address")
                    if address in self.seen:
                        return True
                    if _inside(address, new_blocks):
                        explained += int(block.get("size", 0))
                        return True
                    if owned is not None and not owned(block, _frames_of(block)):
                        return True
                    self.addresses.add(address)
                    return False

                record["groups"] = _bootstrap._groups(snapshot, skip=skip)
        if not record["groups"]:
            rest = grown - explained
            if rest <= limit:
                return None  # what grew is in the new segments the driver saw
            # PyTorch counted them, but its record named none (made before it was turned on,
            # or unreadable): the count alone, with why.
            record["groups"] = [{"blocks": 0, "bytes": rest, "device": None, "frames": []}]
            record["note"] = self.note or (
                "PyTorch kept no Python stack for these blocks; `cudaleak run --exact-pools` "
                "gives each tensor its own driver allocation, seen with its stack"
            )
        elif self.note:
            record["note"] = self.note
        return [record]


def _frames_of(block):
    """A block's frames as the dump writes them (`function`, `file`, `line`)."""
    raw = block.get("frames")
    if not raw and block.get("history"):
        raw = block["history"][-1].get("frames")  # PyTorch 2.0
    return _bootstrap._frames(raw or ())


def _inside(address, ranges):
    """Whether ADDRESS lies in one of RANGES (driver blocks allocated in the window: a new
    segment of the pool, reported as that block already)."""
    return isinstance(address, int) and any(lo <= address < hi for lo, hi in ranges)


def _driver_blocks_since(shim, mark):
    """The address ranges of the driver blocks allocated after MARK and still live (the
    shim's table, through a dump: it has no other way to list them). Empty when there are
    none."""
    if shim.live_since(mark)[0] == 0:
        return []
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cudaleak-window-") as d:
        path = os.path.join(d, "live.json")
        shim.dump(path)
        with open(path, encoding="utf-8") as f:
            live = json.load(f).get("live", [])
    ranges = []
    for r in live:
        if r.get("seq", 0) > mark:
            lo = int(r["address"], 16)
            ranges.append((lo, lo + max(int(r.get("size", 0)), 1)))
    return ranges


def _clear_workspaces(torch):
    """Gives cuBLAS's workspaces back to PyTorch's pool. They live in the caching allocator, one
    per handle and stream, made at a window's first matrix product: PyTorch's count would blame
    that window. Cheap: the blocks stay in the pool, and the next product takes one again."""
    clear = getattr(getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        try:
            clear()
        except Exception:  # noqa: BLE001 - a framework's failure is not the program's
            pass


def start_window():
    """What a window's start needs of the pools, and no more (a test's start: the pytest
    plugin). PyTorch: cuBLAS's workspaces given back, so that its count at the start is taken as
    at the end (`TorchWindow.grown`); its cached segments stay, so a test reuses them rather
    than allocating new ones at the driver (a tensor kept inside one is found by PyTorch's count,
    and named by its record). The pools no count covers emptied (`end_window`)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                _clear_workspaces(torch)
        except Exception:  # noqa: BLE001
            pass
    end_window()


def end_window():
    """The pools no count covers emptied, at a window's start and again at its end, before its
    cheap checks: CuPy's (CuPy has no record) and PyTorch's pinned host cache. An array or pinned
    tensor the window keeps then holds a block of its own, new at the driver with its line, while
    a block such a pool made during the window and only caches is given back (a scalar's
    `.item()` takes a pinned block at every window)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                _empty_host_cache(torch)
        except Exception:  # noqa: BLE001
            pass
    _empty_cupy()


def _empty_host_cache(torch):
    """Gives back PyTorch's cached pinned host blocks that no tensor uses."""
    host_empty = getattr(torch._C, "_host_emptyCache", None)
    if host_empty is not None:
        host_empty()


def _empty_cupy():
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001
            pass


def empty_pools():
    """Gives back what the frameworks' pools hold that no object uses, so that what is still
    allocated after a window is what its objects keep (each pool's `empty` line in
    `cudaleak report --list-caches`). Only frameworks already imported are touched."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                _clear_workspaces(torch)
                torch.cuda.empty_cache()
                _empty_host_cache(torch)
        except Exception:  # noqa: BLE001 - a framework's failure is not the program's
            pass
    _empty_cupy()
