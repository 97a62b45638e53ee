"""Forks after the fake PyTorch (tests/python/fakefw) has initialised: the parent keeps 3000
bytes, the child 5000 more and reads on for a while before it exits normally. Both allocate and
free real device memory through the null runtime, so the shim records in each. tests/tests/
frameworks.rs checks the bootstrap's reader started again in the child (its dump has many reads
of its own count, 8000 bytes at its end) and the parent's count is its own (3000 bytes).

usage: frameworks_fork.py NULLCUDA_DIR
"""
import ctypes
import os
import sys
import time

import torch

rt = ctypes.CDLL(sys.argv[1] + "/libcudart.so.13")


def device_round_trip():
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096)) == 0
    assert rt.cudaFree(p) == 0


kept = [torch.empty(3000)]
device_round_trip()
time.sleep(0.1)
pid = os.fork()
if pid == 0:
    kept.append(torch.empty(5000))
    for _ in range(30):
        device_round_trip()
        time.sleep(0.01)
    sys.exit(0)  # the exit handlers run, as at any script's end
_, status = os.waitpid(pid, 0)
device_round_trip()
print("child", status >> 8)
