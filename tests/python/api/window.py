"""More of cudaleak.track() on the null device, the shim attached by the API: a runtime loaded
only after the first block (seen from the next block on), the growth verdict over the snapshots
a block takes, and a tensor kept inside a PyTorch-like caching allocator (tests/python/fakefw's
torch, on PYTHONPATH: the driver sees nothing; PyTorch's own record names the line). Prints one
JSON object; the expectations are tests/tests/python_api.rs's, by the `# @marker` lines here."""

import ctypes
import json
import sys
import time

import cudaleak

out = {}

with cudaleak.track(snapshot_every=None):
    pass  # the shim is attached here, before the runtime is loaded

rt = ctypes.CDLL("libcudart.so.13")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
kept = []


def malloc(size):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), size) == 0  # @malloc
    return p


with cudaleak.track(snapshot_every=None) as late:
    kept.append(malloc(4096))  # @late
out["late"] = [[g.bytes, g.line] for g in late.leaks]

with cudaleak.track(snapshot_every=0.05) as grows:
    end = time.time() + 1.0
    while time.time() < end:
        kept.append(malloc(4096))  # @grows
        rt.cudaFree(malloc(1 << 16))
        time.sleep(0.005)
out["grows"] = {
    "snapshots": grows.growth.snapshots,
    "suspects": [[c["api"], c["frames"]] for c in grows.growth.suspects],
    "report": grows.growth.report(),
}

with cudaleak.track(snapshot_every=0.05) as steady:
    end = time.time() + 1.0
    while time.time() < end:
        rt.cudaFree(malloc(1 << 16))
        time.sleep(0.005)
out["steady"] = {"snapshots": steady.growth.snapshots, "suspects": len(steady.growth.suspects)}

with cudaleak.track(snapshot_every=None) as short:
    pass
out["short"] = short.growth  # no snapshots: None

import torch  # noqa: E402 - the fake, imported late as a notebook would

weights = torch.empty(1 << 20)  # before the blocks: never blamed
with cudaleak.track(snapshot_every=None):
    pass  # PyTorch's record turned on here
with cudaleak.track(snapshot_every=None) as t:
    for _ in range(10):
        x = torch.empty(4096)
        kept.append(torch.empty(512))  # @tensor
    del x
out["torch"] = {
    "leaks": [[g.bytes, g.allocations, g.api, g.framework, g.line] for g in t.leaks],
    "report": t.report(),
}
with cudaleak.track(snapshot_every=None) as again:
    torch.empty(4096)
out["torch_clean"] = len(again.leaks)

json.dump(out, sys.stdout)
