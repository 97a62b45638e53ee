"""torch_train: a correct PyTorch training loop (one Linear layer, SGD, default caching
allocator). Nothing leaks; at exit the caching allocator's segments and the cuBLAS handles'
workspaces are still held by PyTorch. Under `cudaleak run` it must exit 0 with that memory
listed as cached. Optional argv[1]: steps (default 50)."""
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(steps):
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print(f"torch_train: {steps} steps, loss {loss.item():.4f}")
