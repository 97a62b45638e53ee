"""A PyTorch test suite written the way users write one, for the pytest plugin on the H200
(scripts/gpu-pytest.sh): 20 correct tests and one that keeps a tensor (`# @keep`). Only that
one may fail under `pytest --cudaleak`, in both allocator modes."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "cuda"
_history = []


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(DEV)


@pytest.fixture(scope="module")
def convnet():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(16, 10),
    ).to(DEV)


@pytest.fixture
def batch():
    return torch.randn(64, 256, device=DEV)


def test_add():
    a = torch.ones(1024, device=DEV)
    assert (a + a).sum().item() == 2048


def test_matmul():
    a = torch.randn(512, 512, device=DEV)
    assert (a @ a).shape == (512, 512)


def test_forward(model, batch):
    assert model(batch).shape == (64, 10)


def test_backward(model, batch):
    model.zero_grad(set_to_none=True)
    model(batch).sum().backward()
    assert model[0].weight.grad is not None
    model.zero_grad(set_to_none=True)


def test_training_step(model, batch):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss = F.cross_entropy(model(batch), torch.randint(0, 10, (64,), device=DEV))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    assert loss.item() > 0


def test_adam_step(batch):
    m = nn.Linear(256, 10).to(DEV)
    opt = torch.optim.Adam(m.parameters())
    m(batch).sum().backward()
    opt.step()
    assert len(opt.state) == 2


def test_conv_forward(convnet):
    convnet.eval()
    with torch.no_grad():
        assert convnet(torch.randn(8, 3, 32, 32, device=DEV)).shape == (8, 10)


def test_conv_backward(convnet):
    convnet.train()
    convnet(torch.randn(8, 3, 32, 32, device=DEV)).sum().backward()
    convnet.zero_grad(set_to_none=True)


@pytest.mark.parametrize("n", [1, 7, 64, 1000])
def test_variable_batch(model, n):
    with torch.no_grad():
        assert model(torch.randn(n, 256, device=DEV)).shape == (n, 10)


def test_autocast(model, batch):
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.no_grad():
        assert model(batch).dtype == torch.bfloat16


def test_inplace():
    a = torch.zeros(4096, device=DEV)
    a.add_(1).mul_(3)
    assert a[0].item() == 3


def test_reduction():
    assert torch.arange(1000, device=DEV, dtype=torch.float64).sum().item() == 499500


def test_copy_to_host():
    a = torch.randn(1 << 20, device=DEV)
    assert a.cpu().numel() == 1 << 20


def test_pinned_copy():
    h = torch.randn(1 << 16).pin_memory()
    assert h.to(DEV, non_blocking=True).sum().item() == pytest.approx(h.sum().item(), rel=1e-4)


def test_large_temporary():
    a = torch.empty(256 << 20, dtype=torch.uint8, device=DEV)
    a.fill_(1)
    assert a[-1].item() == 1


def test_softmax_loss():
    logits = torch.randn(128, 1000, device=DEV, requires_grad=True)
    F.cross_entropy(logits, torch.randint(0, 1000, (128,), device=DEV)).backward()
    assert logits.grad.shape == logits.shape


def test_zeros_like(batch):
    assert torch.zeros_like(batch).abs().sum().item() == 0


def test_keeps_history(model, batch):
    """The leak: the loss is kept with its graph, a classic (`losses.append(loss)`)."""
    _history.append(model(batch).sum() * 2)  # @keep
    assert _history
