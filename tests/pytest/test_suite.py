"""A test suite as users write one, for the pytest plugin's tests (tests/tests/pytest_plugin.rs):
device memory from the null runtime through ctypes. Which tests must fail is said in each test;
`# @name` markers name the lines the failures must point at."""
import ctypes
import gc
import os

import pytest

rt = ctypes.CDLL(os.environ["NULLCUDA_DIR"] + "/libcudart.so.13")
kept = []
lazy = {}


def malloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p


def free(p):
    assert rt.cudaFree(p) == 0


def lazy_buffer(key, n):
    if key not in lazy:
        lazy[key] = malloc(n)  # @lazy
    return lazy[key]


@pytest.fixture(scope="module")
def model():
    weights = malloc(8192)
    yield weights
    free(weights)


def test_clean():
    """Passes: frees what it allocates."""
    free(malloc(1000))


def test_keeps_a_block():
    """Fails: keeps 4096 B in a module global."""
    kept.append(malloc(4096))  # @leak


def test_leaks_on_first_call():
    """Fails: lazy initialisation on the first call (the warmed test below passes)."""
    lazy_buffer("first", 2048)


@pytest.mark.cuda_limit_leaks("0 B", warmups=1)
def test_warmed_up():
    """Passes: the warm-up call made the lazy buffer."""
    lazy_buffer("warmed", 2048)


def test_module_fixture(model):
    """Passes: the module-scoped fixture's block is not the test's."""
    free(malloc(100))


@pytest.mark.cuda_limit_leaks("10 KB")
def test_under_its_limit():
    """Passes: 5000 B kept, 10 KB tolerated."""
    kept.append(malloc(5000))


@pytest.mark.cuda_limit_memory("1 MB")
def test_peak_over_limit():
    """Fails: 2 MiB live at once, 1 MB allowed; nothing leaked."""
    free(malloc(2 << 20))


@pytest.mark.parametrize("n", [0, 3])
def test_parametrized(n):
    """test_parametrized[3] fails: it keeps 3000 B."""
    if n:
        kept.append(malloc(n * 1000))  # @param


class CycleBlock:
    """A block freed when its object is collected; the object refers to itself, so only the
    cycle collector frees it."""

    def __init__(self, n):
        self.p = malloc(n)
        self.me = self

    def __del__(self):
        free(self.p)


def test_frees_through_an_old_cycle():
    """Passes: its block's object is garbage only for a full collection (it survived into the
    oldest generation first), which the plugin makes before it fails a test."""
    block = CycleBlock(4096)
    gc.collect(1)  # the survivors of the young generations move to the oldest
    del block


def test_fails_on_its_own():
    """Fails by its own assertion: what it left is not judged."""
    kept.append(malloc(777))
    assert False, "the test's own failure"
