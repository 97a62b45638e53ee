"""leak_eval_no_grad: a validation loop written without torch.no_grad() that collects the model's
outputs in a list to compute metrics at the end: each kept output also keeps the autograd graph
of its batch (every saved activation). The bug: the missing no_grad (and keeping the outputs on
the GPU). Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(10)
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
    nn.Flatten(), nn.Linear(64 * 16, 10),
).cuda()
model.eval()
outputs, targets = [], []
t_end = time.time() + seconds
while time.time() < t_end:
    images = torch.rand(32, 3, 32, 32, device="cuda")
    labels = torch.randint(0, 10, (32,), device="cuda")
    logits = model(images)  # LEAK
    outputs.append(logits)
    targets.append(labels)
    time.sleep(0.02)
accuracy = (torch.cat(outputs).argmax(1) == torch.cat(targets)).float().mean().item()
print(f"leak_eval_no_grad: {len(outputs)} batches kept, accuracy {accuracy:.3f}")
