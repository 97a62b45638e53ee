"""The names the shim, the CLI and this package share — the CUDALEAK_* variables, the shim's
files and the functions it exports — as the CLI prints them from the format crate (`cudaleak env
--names`), asked once per process. Nothing else in the package spells them, but for the two
places below that cannot ask: the variable that finds the CLI, and the fallback."""

import json
import subprocess
import threading

# The variable that names the CLI: needed before there is a CLI to ask (format/src/env.rs, CLI).
CLI_VARIABLE = "CUDALEAK_CLI"

# Only when no `cudaleak` command can be found or run (a preloaded shim can still be driven
# then): a copy of format/src/env.rs and exports.rs, which python/tests/test_names.py holds to
# the CLI's answer.
FALLBACK = {
    "variables": {
        "output": "CUDALEAK_OUTPUT",
        "depth": "CUDALEAK_DEPTH",
        "py_depth": "CUDALEAK_PY_DEPTH",
        "quiet": "CUDALEAK_QUIET",
        "disable": "CUDALEAK_DISABLE",
        "snapshot_interval": "CUDALEAK_SNAPSHOT_INTERVAL",
        "unwind": "CUDALEAK_UNWIND",
        "signal": "CUDALEAK_SIGNAL",
        "shim": "CUDALEAK_SHIM",
        "cli": CLI_VARIABLE,
        "frameworks": "CUDALEAK_FRAMEWORKS",
        "framework_interval_ms": "CUDALEAK_FRAMEWORK_INTERVAL_MS",
        "framework_window_ms": "CUDALEAK_FRAMEWORK_WINDOW_MS",
        "debug": "CUDALEAK_DEBUG",
        "pytest_reexec": "CUDALEAK_PYTEST_REEXEC",
    },
    "exports": {
        "set_recording": "cudaleak_set_recording",
        "mark": "cudaleak_mark",
        "live_since": "cudaleak_live_since",
        "restart_peak": "cudaleak_restart_peak",
        "peak_bytes": "cudaleak_peak_bytes",
        "dump": "cudaleak_dump",
        "dump_records": "cudaleak_dump_records",
        "snapshot": "cudaleak_snapshot",
        "framework_counters": "cudaleak_framework_counters",
        "framework_end": "cudaleak_framework_end",
        "code_event": "cudaleak_code_event",
        "code_watched": "cudaleak_code_watched",
        "attach": "cudaleak_attach",
        "attach_refresh": "cudaleak_attach_refresh",
        "detach": "cudaleak_detach",
    },
    "libraries": {"shim": "libcudaleak.so", "attach": "libcudaleak-attach.so"},
}

_lock = threading.Lock()
_names = None


def names(cli=None):
    """The CLI's `env --names` document (the `cudaleak` command CLI, else as `find_cli` finds
    it), asked the first time; FALLBACK when no CLI answers."""
    global _names
    with _lock:
        if _names is None:
            _names = _ask(cli) or FALLBACK
        return _names


def _ask(cli):
    from . import _shim  # _shim reads its names from here

    try:
        cli = _shim.find_cli(cli)
        got = subprocess.run(
            [cli, "env", "--names"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            check=False,
            # The names are not known yet (the lock is held): the shim's file name as built in.
            env=_shim.cli_environment(FALLBACK["libraries"]["shim"]),
        )
        return json.loads(got.stdout) if got.returncode == 0 else None
    except (_shim.CudaleakError, OSError, ValueError):
        return None


def var(key, cli=None):
    """The variable of KEY (`output`: CUDALEAK_OUTPUT)."""
    return names(cli)["variables"][key]


def export(key, cli=None):
    """The shim's function of KEY (`mark`: cudaleak_mark)."""
    return names(cli)["exports"][key]


def library(key, cli=None):
    """The shim's file name: `shim` (libcudaleak.so) or `attach` (libcudaleak-attach.so)."""
    return names(cli)["libraries"][key]
