"""torch_graphs_amp: a correct PyTorch program using what production training uses beyond a plain
loop: mixed precision (autocast + GradScaler), a CUDA graph captured with torch.cuda.graph and
replayed (its private memory pool), a convolution (cuDNN) and pinned host memory copied in
asynchronously. Nothing leaks; at exit PyTorch still holds its caches, the graph's pool and the
library handles. Under `cudaleak run` it must exit 0."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
    torch.nn.Linear(16 * 32 * 32, 10),
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda")
host = torch.randn(64, 3, 32, 32).pin_memory()
for _ in range(10):
    x = host.to("cuda", non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().square().mean()
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()

# Inference captured once and replayed: the graph's allocations come from a private pool.
model.eval()
static_x = torch.randn(64, 3, 32, 32, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s), torch.no_grad():
    for _ in range(3):
        model(static_x)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g), torch.no_grad():
    static_y = model(static_x)
for _ in range(20):
    static_x.copy_(torch.randn(64, 3, 32, 32, device="cuda"))
    g.replay()
torch.cuda.synchronize()
print("torch_graphs_amp:", float(static_y.sum()))
