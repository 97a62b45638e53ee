"""A training-like loop under the fake PyTorch (tests/python/fakefw): each step makes a few
temporary tensors and keeps one of 512 bytes in a list (the line marked `# @keep`), and
allocates and frees real device memory through the null runtime, so the shim records (and takes
its snapshots). An exit handler of the script keeps one more: the bootstrap's last read, after
the program's own exit handlers, must count it. tests/tests/frameworks.rs runs it with the
bootstrap on PYTHONPATH: PyTorch's own count must rise from snapshot to snapshot, and its record
at exit must name the `# @keep` line.

usage: frameworks_keep.py NULLCUDA_DIR SECONDS (prints `done N`: the tensors kept at exit)
"""
import atexit
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


def train_step(kept):
    activations = [torch.empty(8192), torch.empty(16384)]
    kept.append(torch.empty(512))  # @keep
    gradient = torch.empty(4096)
    del activations, gradient
    device_round_trip()


def main():
    kept = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        train_step(kept)  # @main
        time.sleep(0.005)
    return kept


KEPT = main()  # @module
atexit.register(lambda: KEPT.append(torch.empty(512)))
print("done", len(KEPT) + 1)
