"""The same loop plus one block the program allocates itself through the CUDA runtime (ctypes)
and never frees: expected exit 23 with exactly that block in "leaks"."""
import ctypes

import torch

m = torch.nn.Linear(512, 512).cuda()
for _ in range(5):
    m(torch.randn(64, 512, device="cuda")).sum().backward()
torch.cuda.synchronize()
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(3 << 20)) == 0
print("torch_user_leak ok")
