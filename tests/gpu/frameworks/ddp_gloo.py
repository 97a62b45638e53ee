"""ddp_gloo: `torchrun --nproc_per_node 2 ddp_gloo.py [leak]` — two ranks on one GPU, gloo
process group, DistributedDataParallel training for 20 steps. Correct unless `leak` is given:
then rank 1 also keeps one 4 MiB tensor per step in a global list and frees it through
`del` never — the list is emptied only when Python tears down."""
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256).cuda())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
kept = []
for _ in range(20):
    loss = model(torch.randn(64, 256, device="cuda")).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if rank == 1 and "leak" in sys.argv:
        kept.append(torch.empty(1 << 20, device="cuda"))
torch.cuda.synchronize()
dist.barrier()
print(f"ddp_gloo rank {rank}: kept {len(kept)}")
dist.destroy_process_group()
