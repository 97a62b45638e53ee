"""ok_checkpoint_epochs: a small CNN trained on random images in epochs of about a second; every
epoch it saves a checkpoint (torch.save of model and optimizer state, moved to the host by
torch.save) and a grid of sample outputs as a PNG (torchvision.utils.save_image), in the
current directory. Correct: no growth suspect. argv[1]: seconds (default 12)."""
import sys
import time

import torch
import torch.nn as nn
import torchvision.utils

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
torch.manual_seed(5)
model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.Linear(64 * 64, 10),
).cuda()
decoder = nn.Sequential(nn.Linear(10, 3 * 32 * 32), nn.Sigmoid()).cuda()
opt = torch.optim.Adam(list(model.parameters()) + list(decoder.parameters()), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
epoch = 0
t_end = time.time() + seconds
while time.time() < t_end:
    epoch_end = min(time.time() + 1.0, t_end)
    while time.time() < epoch_end:
        x = torch.rand(128, 3, 32, 32, device="cuda")
        y = torch.randint(0, 10, (128,), device="cuda")
        logits = model(x)
        loss = loss_fn(logits, y) + (decoder(logits.softmax(1)).view_as(x) - x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict()},
               f"checkpoint_{epoch}.pt")
    with torch.no_grad():
        samples = decoder(torch.eye(10, device="cuda")).view(10, 3, 32, 32)
    torchvision.utils.save_image(samples, f"samples_{epoch}.png", nrow=5)
    print(f"epoch {epoch} loss {loss.item():.3f}")
    epoch += 1
print(f"ok_checkpoint_epochs: {epoch} epochs")
