"""A CuPy test suite written the way users write one, for the pytest plugin on the H200
(scripts/gpu-pytest.sh): 20 correct tests and one that keeps an array (`# @keep`)."""
import cupy as cp
import pytest

_cache = {}


@pytest.fixture(scope="module")
def weights():
    return cp.random.default_rng(0).standard_normal((512, 512), dtype=cp.float32)


def test_add():
    a = cp.ones(1024)
    assert float((a + a).sum()) == 2048


def test_matmul(weights):
    assert (weights @ weights).shape == (512, 512)


def test_fft():
    x = cp.random.default_rng(1).standard_normal(4096)
    assert cp.fft.fft(x).shape == (4096,)


@pytest.mark.parametrize("n", [1, 10, 1000, 100000])
def test_sizes(n):
    assert int(cp.arange(n).sum()) == n * (n - 1) // 2


def test_sort():
    x = cp.random.default_rng(2).standard_normal(100000)
    s = cp.sort(x)
    assert bool((s[1:] >= s[:-1]).all())


def test_elementwise_kernel():
    k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2", "double_it")
    assert float(k(cp.ones(16, dtype=cp.float32)).sum()) == 32


def test_reduction_kernel():
    assert float(cp.random.default_rng(3).standard_normal(1 << 16).std()) > 0


def test_linalg_solve():
    a = cp.eye(64) * 2
    assert float(cp.linalg.solve(a, cp.ones(64)).sum()) == 32


def test_to_host():
    assert cp.asnumpy(cp.arange(1000)).sum() == 499500


def test_large_temporary():
    a = cp.zeros(256 << 20, dtype=cp.uint8)
    a += 1
    assert int(a[-1]) == 1


def test_einsum(weights):
    assert cp.einsum("ij,jk->ik", weights, weights).shape == (512, 512)


def test_where():
    x = cp.arange(100)
    assert int(cp.where(x > 50, x, 0).sum()) == sum(range(51, 100))


def test_concatenate():
    assert cp.concatenate([cp.ones(10)] * 10).size == 100


def test_random_normal():
    assert cp.random.default_rng(4).standard_normal((256, 256)).shape == (256, 256)


def test_pinned_memory():
    mem = cp.cuda.alloc_pinned_memory(1 << 20)
    assert mem.size() >= 1 << 20


def test_stream():
    with cp.cuda.Stream() as s:
        a = cp.ones(1 << 20)
        s.synchronize()
    assert float(a.sum()) == 1 << 20


def test_dot():
    assert float(cp.dot(cp.ones(100), cp.ones(100))) == 100


def test_memoizes_results(weights):
    """The leak: a module-level cache keeps every result."""
    _cache[len(_cache)] = weights @ weights  # @keep
    assert _cache
