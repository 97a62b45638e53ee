"""Run with test_wrapper_fixture.py by pytest_main_wrapper.py (tests/tests/pytest_plugin.rs): in a
session pytest.main() started, without the shim preloaded, the plugin attaches it in process and
judges each test. Device memory from the null runtime through ctypes."""
import ctypes
import os

rt = ctypes.CDLL(os.environ["NULLCUDA_DIR"] + "/libcudart.so.13")
kept = []


def malloc(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p


def test_frees_what_it_allocates():
    """Passes."""
    assert rt.cudaFree(malloc(1000)) == 0


def test_keeps_a_block():
    """Fails: keeps 4 KiB (`# @wrapper-leak`)."""
    kept.append(malloc(4096))  # @wrapper-leak
