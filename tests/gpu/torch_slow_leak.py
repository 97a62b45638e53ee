"""torch_slow_leak: a training loop that keeps one small tensor per step in a list it never
trims (loss history kept on the GPU). The caching allocator is off so each tensor is one
cudaMalloc. Run with CUDALEAK_SNAPSHOT_INTERVAL=1: `cudaleak report --growth` must flag the
growing native allocation path. GPU validation for issue 5 (scripts/gpu-growth.sh)."""
import os
import sys
import time

os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
import torch  # noqa: E402

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6
model = torch.nn.Linear(256, 256).cuda()
history = []
t_end = time.time() + seconds
steps = 0
while time.time() < t_end:
    x = torch.randn(64, 256, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    history.append(torch.zeros(65536, device="cuda") + loss.detach())  # 256 KiB kept per step
    model.zero_grad(set_to_none=True)
    steps += 1
    time.sleep(0.05)
torch.cuda.synchronize()
print(f"torch_slow_leak: {steps} steps, {len(history)} tensors kept")
