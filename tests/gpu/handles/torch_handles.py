"""torch_handles: a correct PyTorch training loop that makes PyTorch create its library handles:
cuBLAS (Linear forward on the main thread, backward on the autograd thread, and a matmul),
cuFFT (torch.fft.fft, whose plan PyTorch keeps in its plan cache) and device RNG (torch.randn
on cuda). PyTorch makes each handle once per thread and device and keeps it for the life of the
process: held, not leaked. Under `cudaleak run` it must exit 0, both with the caching allocator
and with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (every tensor a cudaMalloc of its own).
Run by scripts/gpu-handles.sh; by hand: cudaleak run -- python3 tests/gpu/handles/torch_handles.py
"""
import torch


def main():
    # Inside a function, so the tensors are freed when it returns: with the cache off
    # (PYTORCH_NO_CUDA_MEMORY_CACHING=1) tensors a module's globals still hold at exit are each
    # their own cudaMalloc, and the program's (docs/validation.md); here only the handles remain.
    steps = 10
    model = torch.nn.Linear(512, 512).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w = torch.randn(512, 512, device="cuda")
    for step in range(steps):
        x = torch.randn(128, 512, device="cuda")
        y = model(x) @ w
        spectrum = torch.fft.fft(y, dim=-1)
        loss = y.square().mean() + 1e-6 * spectrum.abs().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    print(f"torch_handles: {steps} steps, loss {loss.item():.4f}, done")


main()
