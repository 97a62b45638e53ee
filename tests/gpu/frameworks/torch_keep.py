"""torch_keep: the real leak of ML code: a training loop that keeps one 1 MiB tensor per step
(a loss history kept on the GPU, never trimmed), default caching allocator. Python frees the
list at shutdown, so only a snapshot series shows it: run with CUDALEAK_SNAPSHOT_INTERVAL and
`cudaleak report --growth`. argv[1]: seconds (default 6). Prints the number of tensors kept."""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6
model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []


def train_step(x):
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


t_end = time.time() + seconds
while time.time() < t_end:
    loss = train_step(torch.randn(128, 512, device="cuda"))
    history.append(torch.full((262144,), loss.item(), device="cuda"))  # 1 MiB kept per step
    time.sleep(0.02)
torch.cuda.synchronize()
print(f"torch_keep: {len(history)} tensors kept")
