"""Run by tests/tests/pytest_plugin.rs as `python -O -B -u -W error::UserWarning -X faulthandler
-X cudaleak_probe=kept -m pytest --cudaleak` (and through the `pytest` script): the session the
plugin starts again under the shim must keep the interpreter's options. Every test passes.
`assert` is not used: -O removes it."""
import faulthandler
import io
import os
import sys
import warnings

import pytest


def test_optimize_is_kept():
    if sys.flags.optimize != 1:
        pytest.fail(f"sys.flags.optimize is {sys.flags.optimize}, not 1 (-O)")


def test_warning_options_are_kept():
    if "error::UserWarning" not in sys.warnoptions:
        pytest.fail(f"sys.warnoptions is {sys.warnoptions} (-W error::UserWarning)")
    with pytest.raises(UserWarning):
        warnings.warn("raised under -W error::UserWarning", UserWarning)


def test_x_options_are_kept():
    # faulthandler is among the -X options CPython's own derivation passes on; an option of
    # any other name is not.
    if not faulthandler.is_enabled():
        pytest.fail("faulthandler is not enabled (-X faulthandler)")
    if sys._xoptions.get("cudaleak_probe") != "kept":
        pytest.fail(f"sys._xoptions is {sys._xoptions} (-X cudaleak_probe=kept)")


def test_other_flags_are_kept():
    if not sys.flags.dont_write_bytecode:
        pytest.fail("sys.flags.dont_write_bytecode is not set (-B)")
    if not isinstance(sys.__stdout__.buffer, io.FileIO):
        pytest.fail(f"stdout is buffered ({type(sys.__stdout__.buffer).__name__}; -u)")


def test_the_program_is_kept():
    # What the test run started: `-m pytest`, or the `pytest` script (its path).
    want = os.environ["CUDALEAK_TEST_PROGRAM"]
    main = sys.modules["__main__"]
    got = "-m pytest" if getattr(main, "__spec__", None) else os.path.basename(sys.argv[0])
    if got != want:
        pytest.fail(f"started again as {got!r} (sys.argv[0] {sys.argv[0]}), not {want!r}")


def test_under_the_shim():
    if "libcudaleak" not in os.environ.get("LD_PRELOAD", ""):
        pytest.fail("the shim is not preloaded")
