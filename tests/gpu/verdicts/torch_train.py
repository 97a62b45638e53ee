"""A correct one-layer PyTorch training loop: nothing leaks; the caching allocator and cuBLAS
keep memory until exit (expected: exit 0, pytorch-native/pytorch-async and cublas held)."""
import torch

m = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(20):
    x = torch.randn(64, 512, device="cuda")
    loss = m(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("torch_train ok")
