"""cudaleak.track(), snapshot() and diff() in one process on the null device, the shim attached
by the API (not preloaded). Prints one JSON object of what the API answered; the expectations
are tests/tests/python_api.rs's, by the `# @marker` lines here."""

import ctypes
import json
import sys

rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
kept = []


def malloc(size):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), size) == 0
    return p


def keeps(size):
    kept.append(malloc(size))  # @keep-call


# Allocated before the shim is attached: unknown to it, so never blamed.
early = malloc(1 << 20)

import cudaleak  # noqa: E402

out = {"attached": None}

# Allocated after the shim is attached but before the block: known, and not the block's.
with cudaleak.track(snapshot_every=None):
    pass
out["attached"] = cudaleak._shim.get().attached
before = malloc(2 << 20)

with cudaleak.track(snapshot_every=None) as t:
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), 4096)  # @keep
    kept.append(p)
    rt.cudaFree(malloc(8192))  # freed inside: not a leak
out["kept"] = {
    "leaks": [[leak.bytes, leak.allocations, leak.api, leak.line] for leak in t.leaks],
    "leaked_bytes": t.leaked_bytes,
    "report": t.report(),
}
try:
    t.assert_no_leaks()
    out["kept"]["assert"] = None
except cudaleak.LeakError as e:
    out["kept"]["assert"] = [e.leaked, str(e)]
t.assert_no_leaks("4 KiB")  # at the limit: passes

with cudaleak.track(snapshot_every=None) as clean:
    rt.cudaFree(malloc(1 << 16))
clean.assert_no_leaks()
out["clean"] = {"leaks": len(clean.leaks), "report": clean.report()}


@cudaleak.track(limit=0, snapshot_every=None)
def step(leak):
    if leak:
        keeps(512)  # @step
    else:
        rt.cudaFree(malloc(512))


step(False)
try:
    step(True)
    out["decorator"] = None
except cudaleak.LeakError as e:
    out["decorator"] = [e.leaked, str(e)]

a = cudaleak.snapshot()
keeps(1 << 16)  # @grow
b = cudaleak.snapshot()
d = cudaleak.diff(a, b)
out["diff"] = {"delta_bytes": d.delta_bytes, "report": d.report()}

json.dump(out, sys.stdout)
