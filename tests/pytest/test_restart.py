"""Run by tests/tests/pytest_plugin.rs: how the plugin started the session again under the shim.
CUDALEAK_TEST_RESTART says how it must have: `early` (as the plugin was imported: the command
line said --cudaleak) or `late` (in pytest_load_initial_conftests: the ini file turned the plugin
on, or asked for exact pools the command line did not say); CUDALEAK_TEST_EXACT whether with
exact pools."""
import os

from cudaleak import _names


def test_started_again_as_expected():
    value = os.environ.get(_names.var("pytest_reexec"), "")
    got = "early" if value.startswith("early ") else "late" if value == "1" else value
    assert got == os.environ["CUDALEAK_TEST_RESTART"], value


def test_with_the_allocators_settings_asked_for():
    exact = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") == "backend:cudaMallocAsync"
    assert exact == (os.environ["CUDALEAK_TEST_EXACT"] == "1")


def test_one_run_directory():
    # A session started twice leaves no run directory of the first start behind; the CLI the
    # plugin ran (asked for the shared names) left no dump of its own in it.
    run = os.environ[_names.var("output")].rstrip("/")
    assert os.listdir("cudaleak-out") == [os.path.basename(run)]
    assert os.listdir(run) == []
