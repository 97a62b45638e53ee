"""The package spells the shared names as the CLI does (`cudaleak env --names`, from the format
crate; the CLI from CUDALEAK_CLI): it asks the CLI once per process, keeps a fallback for when
no CLI answers, and the bootstrap, which runs inside the program under test and starts no
process, keeps its own few."""

import json
import os
import subprocess

import cudaleak
from cudaleak import _names


def cli_names():
    got = subprocess.run(
        [os.environ["CUDALEAK_CLI"], "env", "--names"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(got.stdout)


def test_names_are_asked_of_the_cli_once(monkeypatch):
    monkeypatch.setattr(_names, "_names", None)
    first = _names.names(os.environ["CUDALEAK_CLI"])
    assert first == cli_names()
    monkeypatch.setenv("CUDALEAK_CLI", "/nonexistent/cudaleak")
    assert _names.names() is first
    assert _names.var("output") == "CUDALEAK_OUTPUT"
    assert _names.export("attach_refresh") == "cudaleak_attach_refresh"
    assert _names.library("attach") == "libcudaleak-attach.so"


def test_without_a_cli_the_fallback_is_what_the_cli_would_say(monkeypatch):
    monkeypatch.setattr(_names, "_names", None)
    assert _names.names("/nonexistent/cudaleak") is _names.FALLBACK
    names = cli_names()
    for part, fallback in _names.FALLBACK.items():
        assert fallback == names[part], part
    assert names["variables"]["cli"] == _names.CLI_VARIABLE


def test_the_bootstrap_spells_the_names_as_the_cli_does():
    names = cli_names()
    here = os.path.dirname(cudaleak.__file__)
    with open(os.path.join(here, "_bootstrap.py")) as f:
        source = f.read()
    for key in ["debug", "frameworks", "framework_interval_ms", "framework_window_ms"]:
        assert f'"{names["variables"][key]}"' in source, key
    for key in ["framework_counters", "framework_end", "mark", "code_event", "code_watched"]:
        assert f"lib.{names['exports'][key]}" in source, key
    # Whether the shim is preloaded, by the stem of its file name.
    stem = names["libraries"]["shim"].removesuffix(".so")
    assert f'"{stem}" in os.environ.get("LD_PRELOAD", "")' in source
    with open(os.path.join(here, "_sitecustomize.py")) as f:
        assert f'"{names["variables"]["debug"]}"' in f.read()
