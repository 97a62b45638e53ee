"""The plugin on a PyTorch-like caching allocator (fake_torch/, on the null-device runtime): a
tensor kept past the test is found although its segment belongs to the pool; a tensor freed by
the test is not, although its segment stays in the pool until emptied. tests/tests/pytest_plugin.rs
runs it in both allocator modes. The small tensors share a segment that the module's fixture keeps
live, so a small tensor kept by a test is in no new segment: the plugin finds it by PyTorch's own
count in the default mode."""
import pytest
import torch

kept = []


def test_temporary_tensor():
    """Passes: the tensor is freed; its segment stays cached until the plugin empties the pool."""
    t = torch.empty(1 << 20)
    del t


def test_reuses_a_cached_segment():
    """Passes: the same size again, from the pool."""
    a = torch.empty(1 << 20)
    del a
    b = torch.empty(1 << 20)
    del b


def test_keeps_a_tensor():
    """Fails: the tensor is kept in a module list (`# @keep`)."""
    kept.append(torch.empty(2 << 20))  # @keep


@pytest.fixture(scope="module")
def weights():
    """Lives across the module's tests, in the small pool's segment."""
    return torch.empty(64 << 10)


def test_small_temporary(weights):
    """Passes: a small tensor in the fixture's segment, freed."""
    t = torch.empty(16 << 10)
    del t


def test_keeps_a_small_tensor(weights):
    """Fails: a small tensor kept in a segment live before the test (`# @keep-small`)."""
    kept.append(torch.empty(32 << 10))  # @keep-small


_lazy = []


@pytest.mark.cuda_limit_leaks("0 B", warmups=1)
def test_small_lazy_state_under_warmups(weights):
    """Passes: keeps a small tensor on its first call only (lazy state), the warm-up's call."""
    if not _lazy:
        _lazy.append(torch.empty(8 << 10))


@pytest.mark.cuda_limit_leaks("0 B", warmups=1)
def test_keeps_a_small_tensor_every_call(weights):
    """Fails: keeps one per call; the warm-up's is not the judged run's (`# @keep-each`)."""
    kept.append(torch.empty(16 << 10))  # @keep-each
