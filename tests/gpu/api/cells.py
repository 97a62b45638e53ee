"""The `%%cudaleak` cell magic on a GPU, in IPython's own shell (InteractiveShell runs each cell
as a notebook's kernel does, without a kernel process: the GPU machine has no Jupyter). Cells:
a model on the device; a training cell that appends every step's loss (must be shown at its
line); a clean cell (must show no leak); `%cudaleak_report`. Prints each cell's output."""
import sys

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

CELLS = [
    "%load_ext cudaleak",
    """import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
def step():
    x = torch.randn(256, 64, device="cuda")
    loss = nn.functional.mse_loss(model(x), x[:, :1])
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    return loss
for _ in range(20): step().item()
losses = []""",
    """%%cudaleak
for _ in range(200):
    loss = step()
    losses.append(loss)  # LEAK: the graph-free loss tensor kept every step
del loss""",
    """%%cudaleak
for _ in range(200):
    step().item()""",
    "%cudaleak_report",
]

shell = InteractiveShell.instance()
failed = 0
for i, cell in enumerate(CELLS, 1):
    with capture_output() as out:
        result = shell.run_cell(cell, store_history=True)
    print(f"---- cell {i} (ok={result.success})")
    print(out.stdout, end="")
    if out.stderr:
        print("[stderr]", out.stderr, end="")
    if not result.success:
        failed += 1
        print("[error]", repr(result.error_in_exec or result.error_before_exec))
sys.exit(1 if failed else 0)
