"""leak_closure: a training loop whose step function registers a logging callback, a closure over
that step's logits, to be run "later" by a logger that never drains its queue: every step's
logits (256 x 1000 floats, 1 MiB) stay alive through the closure's cell.
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(14)
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1000)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
pending_callbacks = []


def train_step(x, y):
    logits = model(x)  # LEAK
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    pending_callbacks.append(lambda: (logits.argmax(1) == y).float().mean().item())


t_end = time.time() + seconds
while time.time() < t_end:
    train_step(torch.randn(256, 512, device="cuda"), torch.randint(0, 1000, (256,), device="cuda"))
    time.sleep(0.01)
print(f"leak_closure: {len(pending_callbacks)} callbacks pending, "
      f"last accuracy {pending_callbacks[-1]():.3f}")
