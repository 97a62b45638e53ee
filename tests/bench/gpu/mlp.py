"""mlp: a PyTorch MLP training loop. Prints the timed loop's seconds.
GPU benchmark (scripts/gpu-bench.sh).

    python3 mlp.py [STEPS] [WIDTH]            one timed loop of STEPS steps
    python3 mlp.py STEPS WIDTH ab [ROUNDS]    under the shim: ROUNDS rounds of STEPS steps,
                                              alternating recording on and off

WIDTH (default 4096) is the hidden layer's width; a small one (256, batch 64) makes each step a
few kernels of microseconds, so the step's time is Python and dispatch on the CPU and the
allocations' cost shows instead of hiding behind the GPU. The A/B mode times the recording's own
cost inside one process (ab_rounds.py: cudaleak_set_recording, as ab.cu does), free of the
drift between separate runs that hides a 2 % difference in a CPU-bound loop; it prints the median
rounds and their ratio."""
import sys
import time

import torch

import ab_rounds
import mlp_model

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
width = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
ab = len(sys.argv) > 3 and sys.argv[3] == "ab"
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
step, _ = mlp_model.training_step(width)


def timed(n):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        loss = step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, loss


for _ in range(20):  # warm-up: kernels chosen, caching allocator filled
    step()

if not ab:
    s, loss = timed(steps)
    print(f"loop_s {s:.6f}\nms_per_step {s * 1e3 / steps:.3f}\nloss {loss.item():.4f}")
    sys.exit(0)

on, off = ab_rounds.alternate(rounds, lambda: timed(steps)[0])
print(f"round_on_s {on:.6f}\nround_off_s {off:.6f}\nratio {on / off:.4f}")
