"""ok_resnet_infer_varbatch: an inference server's loop: torchvision resnet18 (random weights)
under torch.no_grad on requests of random batch sizes, results copied to the host. Each new
largest batch makes the caching allocator take more; nothing is kept. Correct: no growth
suspect. argv[1]: seconds (default 12)."""
import random
import sys
import time

import torch
import torchvision

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
rng = random.Random(1)
model = torchvision.models.resnet18(weights=None).cuda().eval()
served = 0
requests = 0
t_end = time.time() + seconds
with torch.no_grad():
    while time.time() < t_end:
        batch = rng.choice((1, 1, 2, 4, 8, 8, 16, 32, 64, 96, 128))
        images = torch.rand(batch, 3, 224, 224).pin_memory().cuda(non_blocking=True)
        top5 = model(images).softmax(1).topk(5).indices.cpu()
        served += len(top5)
        requests += 1
print(f"ok_resnet_infer_varbatch: {requests} requests, {served} images")
