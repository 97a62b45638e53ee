"""Needs the fixture pytest_main_wrapper.py's plugin object gives: it passes only in a session
that program started (tests/tests/pytest_plugin.rs)."""


def test_uses_the_wrappers_fixture(given_by_the_wrapper):
    assert given_by_the_wrapper == "wrapper"
