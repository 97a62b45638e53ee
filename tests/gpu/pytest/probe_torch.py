"""What the pytest plugin asks of PyTorch, asked of the real one (scripts/gpu-pytest.sh runs it):
whether the allocator's record can be turned on before CUDA is initialised and leaves it so, the
order of a block's frames, what reading the record costs (first and later reads), and how much
of PyTorch's count a matrix product's cuBLAS workspace is."""
import time

import torch

print("initialised before:", torch.cuda.is_initialized())
torch.cuda.memory._record_memory_history(enabled="state", context="alloc", stacks="python")
print("recording on; initialised after:", torch.cuda.is_initialized())


def make():
    return torch.empty(1000, device="cuda")


x = make()
print("backend:", torch.cuda.get_allocator_backend(), "allocated:", torch.cuda.memory_allocated())
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
model = model.cuda()
kept = [model(torch.randn(64, 256, device="cuda")) for _ in range(50)]
for i in range(4):
    t0 = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    blocks = [b for seg in snap["segments"] for b in seg["blocks"]]
    print(f"snapshot {i + 1}: {(time.perf_counter() - t0) * 1e3:.1f} ms, {len(blocks)} blocks")
first = next(b for b in blocks if b["address"] == x.data_ptr())
print("x's frames:", [(f["name"], f["filename"].rsplit("/", 1)[-1], f["line"]) for f in first["frames"]])
del kept, model
a = torch.randn(64, 64, device="cuda")
b = a @ a
del a, b
torch.cuda.synchronize()
print("after a matmul:", torch.cuda.memory_allocated())
torch._C._cuda_clearCublasWorkspaces()
print("after clearing the cuBLAS workspaces:", torch.cuda.memory_allocated())
