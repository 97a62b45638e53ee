"""leak_losses_append: the classic `losses.append(loss)` instead of `loss.item()`: every step
keeps its loss tensor (4 bytes, a 512-byte block of the caching allocator) and its graph's
nodes. Small per step, so it shows only over many steps; the loop is fast on purpose.
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(11)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
losses = []
t_end = time.time() + seconds
while time.time() < t_end:
    x = torch.randn(256, 64, device="cuda")
    y = x[:, :1] * 3.0
    loss = nn.functional.mse_loss(model(x), y)  # LEAK
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss)
mean = torch.stack(losses).mean().item()
print(f"leak_losses_append: {len(losses)} losses kept, mean {mean:.4f}")
