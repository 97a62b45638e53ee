"""A cache under the fake PyTorch (tests/python/fakefw) that fills for the first third of the run
and then stays as it is, with temporaries every step and nothing kept beyond the cache; each step
allocates and frees real device memory through the null runtime, so the shim records (and takes
its snapshots). tests/tests/frameworks.rs runs it with the bootstrap on PYTHONPATH: PyTorch's own
count must level off.

usage: frameworks_warm.py NULLCUDA_DIR SECONDS (prints `done N`: the tensors cached)
"""
import ctypes
import sys
import time

import torch

runtime_dir, seconds = sys.argv[1], float(sys.argv[2])
rt = ctypes.CDLL(runtime_dir + "/libcudart.so.13")


def device_round_trip():
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
    assert rt.cudaFree(p) == 0


def step(cache, n, warm):
    if warm:
        cache[n] = torch.empty(2048)
    scratch = torch.empty(8192)
    del scratch
    device_round_trip()


def main():
    cache = {}
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        step(cache, n, time.monotonic() - start < seconds / 3)
        n += 1
        time.sleep(0.005)
    return cache


CACHE = main()
print("done", len(CACHE))
