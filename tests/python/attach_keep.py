"""A training loop `cudaleak attach` comes to while it runs (tests/tests/attach.rs): it allocates
through the null runtime with ctypes.CDLL, prints "ready", then for STEPS steps, SLEEP_MS apart,
keeps one 2048-byte block per step from `train_step` and allocates and frees a 512-byte one; then
prints "done" and exits 0. With `steady`, a step allocates nothing (as a training loop whose
caching allocator has every segment it needs): the loop a correct job runs when attached to.

usage: attach_keep.py NULLCUDA_DIR STEPS SLEEP_MS [steady]
"""
import ctypes
import sys
import time

runtime_dir, steps, sleep_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
steady = sys.argv[4:] == ["steady"]
rt = ctypes.CDLL(runtime_dir + "/libcudart.so.13")
kept = []


def cuda_malloc(size):
    p = ctypes.c_void_p()
    status = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    assert status == 0, status
    return p


def train_step():
    kept.append(cuda_malloc(2048))  # @keep
    scratch = cuda_malloc(512)
    assert rt.cudaFree(scratch) == 0


rt.cudaFree(cuda_malloc(16))
print("ready", flush=True)
for _ in range(steps):
    if not steady:
        train_step()
    time.sleep(sleep_ms / 1000)
print("done", flush=True)
