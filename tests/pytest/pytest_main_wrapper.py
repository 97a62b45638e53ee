"""Run by tests/tests/pytest_plugin.rs as `python pytest_main_wrapper.py --cudaleak
test_wrapper_fixture.py test_wrapper_leak.py`: a program that starts pytest itself with a plugin
object of its own, which the plugin cannot start again under the shim (`python -m pytest` would
run without the object, and the test that needs its fixture would fail). The plugin attaches the
shim in this process instead and judges each test."""
import sys

import pytest


class WrapperPlugin:
    @pytest.fixture
    def given_by_the_wrapper(self):
        return "wrapper"


if __name__ == "__main__":
    sys.exit(pytest.main(sys.argv[1:], plugins=[WrapperPlugin()]))  # @main
