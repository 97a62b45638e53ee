"""The MLP training step the PyTorch benchmarks time (mlp.py, record_cost.py): a model of
WIDTH hidden units, SGD, one fixed batch (512 rows, or 64 for a narrow model, whose step is
then Python and dispatch rather than GPU work)."""
import torch


def training_step(width):
    """A function doing one training step (it returns the loss), and the model's forward for
    callers that keep outputs."""
    batch = 512 if width >= 1024 else 64
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 1024, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def loss_only():
        return torch.nn.functional.cross_entropy(model(x), y)

    return step, loss_only
