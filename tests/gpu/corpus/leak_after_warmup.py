"""leak_after_warmup: a training loop that starts collecting per-sample probabilities for a
calibration metric once the warm-up phase (the first 40% of the run) is over, keeping them on
the GPU: clean at first, then 0.5 MiB kept per step. Expected: a growth suspect at the `# LEAK`
line (growth only in the later snapshots). argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(15)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
calibration = []
t_start = time.time()
t_warm, t_end = t_start + 0.4 * seconds, t_start + seconds
while time.time() < t_end:
    x = torch.randn(256, 256, device="cuda")
    y = torch.randint(0, 512, (256,), device="cuda")
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if time.time() > t_warm:
        calibration.append(logits.detach().softmax(1))  # LEAK
    time.sleep(0.01)
print(f"leak_after_warmup: {len(calibration)} probability batches kept")
