"""cudaleak.track() on PyTorch's default (caching) allocator, on a GPU: the shim attached in
process after the model is on the device. A block that appends every step's loss must be shown
at the `# LEAK` line (PyTorch's own record: the losses sit in segments the cache already had);
the same loop with `loss.item()` must show nothing; then the cost of track() around a training
loop, against the same loop bare. Prints one JSON object. argv[1]: steps per block (300)."""
import json
import sys
import time

import torch
import torch.nn as nn

import cudaleak

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(11)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)


def step(keep):
    x = torch.randn(256, 64, device="cuda")
    y = x[:, :1] * 3.0
    loss = nn.functional.mse_loss(model(x), y)  # LEAK
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if keep is not None:
        keep.append(loss)
    else:
        loss.item()


for _ in range(20):  # warm: the optimizer's state and the cache's segments exist before
    step(None)
out = {"torch": torch.__version__}
losses = []
t0 = time.perf_counter()
with cudaleak.track(snapshot_every=None) as t:
    for _ in range(steps):
        step(losses)
out["leak_block_s"] = round(time.perf_counter() - t0, 3)
out["leak"] = [{"bytes": g.bytes, "allocations": g.allocations, "api": g.api,
                "framework": g.framework, "line": g.line} for g in t.leaks]
out["leak_report"] = t.report()
with cudaleak.track(snapshot_every=None) as t:
    for _ in range(steps):
        step(None)
out["clean"] = [{"bytes": g.bytes, "line": g.line, "framework": g.framework} for g in t.leaks]
out["clean_report"] = t.report()
del losses


def loop():
    for _ in range(steps):
        step(None)
    torch.cuda.synchronize()


def timed(tracked):
    """(enter, loop, exit) seconds; bare: (0, loop, 0)."""
    torch.cuda.synchronize()
    if not tracked:
        t0 = time.perf_counter()
        loop()
        return 0.0, time.perf_counter() - t0, 0.0
    t0 = time.perf_counter()
    tr = cudaleak.track(snapshot_every=None).__enter__()
    t1 = time.perf_counter()
    loop()
    t2 = time.perf_counter()
    tr.__exit__(None, None, None)
    return t1 - t0, t2 - t1, time.perf_counter() - t2


rows = {"bare": [], "tracked": []}
for _ in range(5):
    rows["bare"].append(timed(False))
    rows["tracked"].append(timed(True))
med = lambda v: sorted(v)[len(v) // 2]
cost = {"steps": steps}
for name, rs in rows.items():
    for k, part in enumerate(("enter", "loop", "exit")):
        cost[f"{name}_{part}_s"] = [round(r[k], 4) for r in rs]
cost["loop_ratio"] = round(med([r[1] for r in rows["tracked"]]) / med([r[1] for r in rows["bare"]]), 3)
cost["enter_median_s"] = med([r[0] for r in rows["tracked"]])
cost["exit_median_s"] = med([r[2] for r in rows["tracked"]])
out["cost"] = cost
print(json.dumps(out, indent=1))
