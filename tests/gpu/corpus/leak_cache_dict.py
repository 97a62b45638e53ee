"""leak_cache_dict: a feature-extraction loop that memoises the backbone's activations in a dict
keyed by step "for the later analysis pass", never evicting: one 2 MiB tensor kept per step.
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(13)
backbone = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 2048)).cuda()
head = nn.Linear(2048, 100).cuda()
opt = torch.optim.Adam(head.parameters(), lr=1e-3)
feature_cache = {}
step = 0
t_end = time.time() + seconds
while time.time() < t_end:
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randint(0, 100, (256,), device="cuda")
    with torch.no_grad():
        feats = backbone(x)  # LEAK
    feature_cache[step] = feats
    loss = nn.functional.cross_entropy(head(feats), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    step += 1
    time.sleep(0.01)
print(f"leak_cache_dict: {len(feature_cache)} activations cached")
