"""torch_alloc: the shim's cost per PyTorch tensor allocation and free, in one process.

    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync LD_PRELOAD=libcudaleak.so \
        python3 torch_alloc.py [DEPTH] [N] [ROUNDS]

Each round makes and drops N one-KiB tensors (one cudaMallocAsync and one cudaFreeAsync each
under --exact-pools' allocator) from DEPTH nested Python calls (default 20); rounds alternate
recording on and off (ab_rounds.py). Prints the median round's nanoseconds per
allocation-and-free pair with recording on and off, and their difference: what the shim adds.
GPU benchmark (scripts/gpu-bench.sh)."""
import sys
import time

import torch

import ab_rounds

depth = int(sys.argv[1]) if len(sys.argv) > 1 else 20
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20


def loop():
    t0 = time.perf_counter()
    for _ in range(n):
        torch.empty(256, device="cuda")
    return time.perf_counter() - t0


def nested(d):
    return loop() if d <= 1 else nested(d - 1)


on, off = ab_rounds.alternate(rounds, lambda: nested(depth) * 1e9 / n)
print(f"pair_on_ns {on:.0f}\npair_off_ns {off:.0f}\nadded_ns {on - off:.0f}")
