"""The cudaleak shim in this process, for the Python API: the copy that is preloaded
(`cudaleak run`, `LD_PRELOAD`, the pytest plugin's session), else one loaded now and attached to
the running process, as `cudaleak attach` does from outside but without stopping any thread:
the calling thread loads it and calls `cudaleak_attach` itself (docs/attach.md, "The route").

The shim's control functions are documented in docs/dump-format.md ("The shim's control
functions"); the CLI is the only reader of the dumps (the report's words are written once)."""

import atexit
import ctypes
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading

from . import _names

DRIVER = "libcuda.so.1"

# `cudaleak_attach`'s answers below zero, in words (docs/attach.md, "When attach fails").
ATTACH_ERRORS = {
    -1: "the shim is being attached by another thread or `cudaleak attach`",
    -2: "another copy of the shim records this process already",
    -3: "the CUDA driver (libcuda.so.1) is not loaded",
    -4: "the loader's dlsym could not be found",
    -5: "the shim refused its configuration (a CUDALEAK_* variable of this process?)",
    -6: "the shim failed while attaching (a bug: please report it); nothing was changed",
}


class CudaleakError(RuntimeError):
    """cudaleak could not do what was asked (no shim, no CLI, no driver); the message says why
    and what to do."""


def find_cli(given=None):
    """The `cudaleak` command: GIVEN, else $CUDALEAK_CLI, else the one installed with this
    package, else the one on PATH."""
    given = given or os.environ.get(_names.CLI_VARIABLE)
    if given:
        return given
    beside = os.path.join(sysconfig.get_path("scripts"), "cudaleak")
    if os.path.isfile(beside):
        return beside
    found = shutil.which("cudaleak")
    if not found:
        raise CudaleakError(
            "cudaleak: the cudaleak command is not installed here (pip install cudaleak), "
            "not on PATH, and CUDALEAK_CLI does not name it"
        )
    return found


def cli_environment(shim=None):
    """This process's environment without the shim (file name SHIM, default the shared name) in
    LD_PRELOAD, for the CLI: it is no CUDA program, and under the shim it would start one more
    recording and leave its own dump in the session's run directory."""
    shim = shim or _names.library("shim")
    env = dict(os.environ)
    kept = [
        p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if os.path.basename(p) != shim
    ]
    if kept:
        env["LD_PRELOAD"] = " ".join(kept)
    else:
        env.pop("LD_PRELOAD", None)
    return env


def run_cli(cli, args, ok=(0,)):
    """Runs `cudaleak ARGS`; its standard output, or CudaleakError with its message when it
    exits with a status not in OK. Returns (status, stdout)."""
    got = subprocess.run(
        [cli, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        env=cli_environment(),
    )
    if got.returncode not in ok:
        raise CudaleakError(
            f"cudaleak: `{cli} {' '.join(args)}` failed ({got.returncode}): {got.stderr.strip()}"
        )
    return got.returncode, got.stdout


class Shim:
    """The shim's control functions (ctypes), and where its snapshots go."""

    def __init__(self, lib, output, attached):
        self.lib = lib
        #: CUDALEAK_OUTPUT as the shim has it (None: the working directory).
        self.output = output
        #: True when this package loaded the shim (not preloaded).
        self.attached = attached
        self._mark = _fn(lib, "mark", ctypes.c_uint64, [])
        self._live_since = _fn(lib, "live_since", ctypes.c_int, [ctypes.c_uint64, ctypes.c_void_p])
        self.restart_peak = _fn(lib, "restart_peak", None, [])
        self.peak_bytes = _fn(lib, "peak_bytes", ctypes.c_uint64, [])
        self._dump = _fn(lib, "dump_records", ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p])
        self._snapshot = _fn(lib, "snapshot", ctypes.c_int, [])
        self._refresh = _fn(lib, "attach_refresh", ctypes.c_int, []) if attached else None

    def refresh(self):
        """Attached: replaces the pointers of modules loaded since the last pass (a framework
        imported after the shim was attached), so that what they allocate is seen. Nothing to
        do for a preloaded shim, which sees every module."""
        if self._refresh is not None:
            self._refresh()

    def mark(self):
        """The sequence number of the last call recorded: blocks allocated later have larger."""
        return self._mark()

    def live_since(self, mark):
        """(blocks, bytes) allocated after MARK and still live."""
        out = (ctypes.c_uint64 * 2)()
        if self._live_since(mark, ctypes.addressof(out)) != 0:
            return 0, 0
        return out[0], out[1]

    def dump(self, path, records=None):
        """Writes a dump of what is live now to PATH (a name not taken: the shim never replaces
        a dump), with RECORDS (a framework's own record of the live blocks of a window,
        docs/dump-format.md "frameworks") as its `frameworks.records`."""
        text = None if records is None else json.dumps(records).encode()
        if self._dump(os.fsencode(path), text) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cudaleak: the shim could not write a dump to {path}")

    def snapshot(self):
        """Writes the next dump of the snapshot series now; its path, or None when the shim
        could not (it said why on standard error)."""
        n = self._snapshot()
        if n <= 0:
            return None
        return snapshot_path(self.output, os.getpid(), n)


def snapshot_path(output, pid, n):
    """Where the shim writes snapshot N of process PID under CUDALEAK_OUTPUT=OUTPUT (None: the
    working directory), as shim/src/config.rs names it."""
    path = f"cudaleak.{pid}.json"
    if output:
        expanded = output.replace("%p", str(pid))
        if expanded.endswith("/") or os.path.isdir(expanded):
            path = os.path.join(expanded, path)
        else:
            path = expanded
    head, name = os.path.split(path)
    name = f"{name[:-5]}.snapshot-{n}.json" if name.endswith(".json") else f"{name}.snapshot-{n}"
    return os.path.join(head, name)


def _fn(lib, key, restype, argtypes):
    """The shim's exported function of KEY (`mark`: cudaleak_mark), typed."""
    f = getattr(lib, _names.export(key))
    f.restype = restype
    f.argtypes = argtypes
    return f


_lock = threading.Lock()
_shim = None


def preloaded():
    """Whether a copy of the shim records this process already (preloaded)."""
    try:
        getattr(ctypes.CDLL(None), _names.export("mark"))
    except AttributeError:
        return False
    return True


def get(cli=None):
    """The shim recording this process: the preloaded one, else one attached now (the first
    call loads it; later calls return the same). Raises CudaleakError when it cannot be had."""
    global _shim
    with _lock:
        if _shim is None:
            _names.names(cli)  # the names asked of this CLI, if it is the first to ask
            _shim = _preloaded() or _attach(find_cli(cli))
        return _shim


def _preloaded():
    if not preloaded():
        return None
    output = os.environ.get(_names.var("output")) or None
    return Shim(ctypes.CDLL(None, use_errno=True), output, attached=False)


def _attach(cli):
    """Loads the shim into this process under its attach name (libcudaleak-attach.so: loaded
    so, it starts only when told to) and starts it recording: the pointers to the driver's
    allocation functions that the loaded modules keep are replaced by its hooks (docs/attach.md).
    Blocks allocated before are unknown to it, so never blamed on a window."""
    try:
        ctypes.CDLL(DRIVER)
    except OSError as e:
        raise CudaleakError(
            f"cudaleak: the CUDA driver ({DRIVER}) could not be loaded ({e}); without a GPU, "
            "put the null device's directory first on LD_LIBRARY_PATH (README.md, \"Without "
            "a GPU: the null device\")"
        ) from None
    shim = os.environ.get(_names.var("shim", cli)) or _shim_of(cli)
    work = tempfile.mkdtemp(prefix="cudaleak-")
    link = os.path.join(work, _names.library("attach"))
    os.symlink(os.path.abspath(shim), link)
    output = os.path.join(work, "dumps")
    os.mkdir(output)
    try:
        lib = ctypes.CDLL(link, use_errno=True)
    except OSError as e:
        shutil.rmtree(work, ignore_errors=True)
        raise CudaleakError(f"cudaleak: the shim {shim} could not be loaded: {e}") from None
    attach = _fn(lib, "attach", ctypes.c_int, [ctypes.c_char_p])
    config = f"{_names.var('output')}={output}/\n{_names.var('quiet')}=1\n"
    got = attach(config.encode())
    if got < 0:
        shutil.rmtree(work, ignore_errors=True)
        why = ATTACH_ERRORS.get(got, f"it answered {got}")
        raise CudaleakError(f"cudaleak: the shim {shim} could not start recording: {why}")
    detach = _fn(lib, "detach", ctypes.c_int, [])

    def let_go():
        # The pointers put back and the last dump written before the directory goes: the
        # shim would otherwise write its exit dump into it after Python's end.
        detach()
        shutil.rmtree(work, ignore_errors=True)

    atexit.register(let_go)
    return Shim(lib, output + "/", attached=True)


def _shim_of(cli):
    """libcudaleak.so as `cudaleak run` finds it (`cudaleak env --json`'s LD_PRELOAD)."""
    _, out = run_cli(cli, ["env", "--json"])
    stem = os.path.splitext(_names.library("shim"))[0]  # libcudaleak
    for entry in reversed(json.loads(out).get("LD_PRELOAD", "").replace(":", " ").split()):
        if os.path.basename(entry).startswith(stem):
            return entry
    raise CudaleakError(f"cudaleak: `{cli} env --json` named no shim library")
