"""torch_loop: a small training loop that prints "ready" after its first step and runs until a
signal ends it (scripts/gpu-signals.sh, issue 21). PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes every
tensor a cudaMalloc/cudaFree, so the signal often lands inside the shim."""
import sys

import torch

model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while True:
    x = torch.randn(64, 512, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 0:
        torch.cuda.synchronize()
        print("ready", flush=True)
    step += 1
