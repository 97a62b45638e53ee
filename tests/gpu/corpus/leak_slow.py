"""leak_slow: a slow leak: every 10th step the loop snapshots the weights "for an EMA plot"
(a 1 MiB clone) and never drops it. Expected: a growth suspect at the `# LEAK` line.
argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(16)
model = nn.Sequential(nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
weight_history = []
step = 0
t_end = time.time() + seconds
while time.time() < t_end:
    x = torch.randn(128, 512, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        weight_history.append(model[0].weight.detach().clone())  # LEAK
    step += 1
    time.sleep(0.005)
print(f"leak_slow: {step} steps, {len(weight_history)} weight copies kept")
