"""record_cost: what PyTorch's own allocation record costs once the cudaleak bootstrap turns it
on (`_record_memory_history(enabled="state", context="alloc", stacks="python")`, after PyTorch's
count rose through four windows), and what reading it at the script's end (`_snapshot()`)
costs. GPU benchmark (scripts/gpu-frameworks-cost.sh); needs no shim.

    python3 record_cost.py [STEPS] [WIDTH] [ROUNDS] [KEPT]

Rounds of STEPS training steps of the MLP of mlp_model.py, alternating the record off and on, in one
process (so the drift between runs does not hide a few per cent); prints the median rounds and
their ratio. Then KEPT tensors are made with the record on and kept, as `losses.append(loss)`
keeps them, and `_snapshot()` is timed twice (PyTorch's first call in a process pays more)."""
import statistics
import sys
import time

import torch

import mlp_model

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
width = int(sys.argv[2]) if len(sys.argv) > 2 else 256
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
kept_n = int(sys.argv[4]) if len(sys.argv) > 4 else 5000
step, loss_only = mlp_model.training_step(width)


def record(on):
    torch.cuda.memory._record_memory_history(
        enabled="state" if on else None, context="alloc", stacks="python"
    )


def timed():
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


for _ in range(3):
    timed()
off, on = [], []
for r in range(rounds):
    record(r % 2 == 1)
    (on if r % 2 == 1 else off).append(timed())
record(False)
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"round_off {m_off:.6f}")
print(f"round_on {m_on:.6f}")
print(f"record_ratio {m_on / m_off:.4f}")

record(True)
kept = []
for _ in range(kept_n):
    kept.append(loss_only().detach())
for i in (1, 2):
    t = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    s = time.perf_counter() - t
    blocks = sum(
        1 for seg in snap["segments"] for b in seg["blocks"]
        if b.get("state") == "active_allocated" and b.get("frames")
    )
    print(f"snapshot{i}_s {s:.4f} blocks_with_frames {blocks}")
