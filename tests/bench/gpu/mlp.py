"""mlp: a PyTorch MLP training loop (default caching allocator). Prints the timed loop's seconds.
GPU benchmark (scripts/gpu-bench.sh)."""
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 10),
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(512, 1024, device="cuda")
y = torch.randint(0, 10, (512,), device="cuda")


def step():
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


for _ in range(20):  # warm-up: kernels chosen, caching allocator filled
    step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
torch.cuda.synchronize()
s = time.perf_counter() - t0
print(f"loop_s {s:.6f}\nms_per_step {s * 1e3 / steps:.3f}\nloss {loss.item():.4f}")
