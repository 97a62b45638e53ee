"""pytest plugin: fail the test that leaks GPU memory, with the line that allocated it.

`pytest --cudaleak` (or `cudaleak = true` in the ini file) runs the session with the cudaleak
shim preloaded: when it is not, pytest is started again under it before any test module or
conftest is imported, so before CUDA is touched (the same program, interpreter options and
arguments; a session that `pytest.main()` started is refused: it cannot be made again). Around
each test's call the plugin asks the shim which blocks were allocated during the call and are
still live when it returns (after `gc.collect()` and emptying the frameworks' pools); when there
are any it writes a dump and lets `cudaleak report --since MARK --pools-emptied` judge them, with
the CLI's rules: blocks held by caches and library handles are not the test's leak
(`--cudaleak-fail-on strict` counts them), `leak:` lines of `--cudaleak-suppressions` apply. A
test that leaks fails with the callsites, its Python lines first.

Markers (as pytest-memray's, for GPU memory):

    @pytest.mark.cuda_limit_leaks("1 MB", warmups=1)   # tolerate up to 1 MB; run the body
                                                       # once first so lazy state settles
    @pytest.mark.cuda_limit_memory("512 MB")           # fail above this peak of live bytes

docs/pytest.md describes the plugin; README.md shows how to install it.
"""

import ctypes
import gc
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pluggy
import pytest

# Set in the environment of the pytest started again under the shim, so a shim that failed to
# load is an error, not a loop.
REEXEC_VAR = "CUDALEAK_PYTEST_REEXEC"
# The CLI's exit status when the gate fails (`cudaleak report --exit-code`).
GATE_FAILED = 23
UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_size(text):
    """`"1 MB"` -> 1048576: B, KB, MB, GB, TB are multiples of 1024 (as pytest-memray reads
    them; KiB, MiB, GiB, TiB say the same)."""
    if isinstance(text, int) and text >= 0:
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in UNITS:
        raise pytest.UsageError(
            f"cudaleak: {text!r} is not a size (a number and B, KB, MB, GB or TB)"
        )
    return int(float(m.group(1)) * UNITS[m.group(2).lower()])


def human(n):
    """Bytes as the CLI writes them: `4.00 MiB`."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def pytest_addoption(parser):
    group = parser.getgroup("cudaleak", "GPU memory leaks per test (cudaleak)")
    group.addoption(
        "--cudaleak",
        action="store_true",
        default=None,
        help="fail each test that leaves GPU blocks its own code allocated (runs pytest "
        "under the cudaleak shim)",
    )
    group.addoption(
        "--cudaleak-exact-pools",
        action="store_true",
        help="give every tensor/array its own driver allocation (as `cudaleak run "
        "--exact-pools`): a kept tensor is seen even where the pool had room for it",
    )
    group.addoption(
        "--cudaleak-fail-on",
        choices=["leaks", "errors", "all", "strict"],
        default="all",
        help="what fails a test, as `cudaleak report --fail-on` (strict: blocks held by "
        "caches and library handles count too)",
    )
    group.addoption(
        "--cudaleak-suppressions",
        metavar="FILE",
        help="a cudaleak suppression file (`leak:PATTERN`, `cache:PATTERN` lines)",
    )
    group.addoption(
        "--cudaleak-out",
        metavar="DIR",
        default="cudaleak-out",
        help="each session gets a fresh run directory here, as `cudaleak run --out DIR` makes: "
        "the dumps of the tests that left blocks, and the session's exit dump "
        "(default: cudaleak-out)",
    )
    group.addoption(
        "--cudaleak-bin",
        metavar="PATH",
        help="the cudaleak command (default: $CUDALEAK_CLI, then the one installed with "
        "this plugin, then PATH)",
    )
    parser.addini("cudaleak", type="bool", default=False, help="as --cudaleak")
    parser.addini(
        "cudaleak_exact_pools", type="bool", default=False, help="as --cudaleak-exact-pools"
    )


def option(config, name):
    """An option's value, also before pytest_configure (then only the known arguments are
    parsed, into `known_args_namespace`)."""
    early = getattr(config, "known_args_namespace", None)
    value = getattr(early, name, None) if early is not None else None
    return value if value is not None else config.getoption(name, default=None)


def enabled(config):
    flag = option(config, "cudaleak")
    return bool(flag) if flag is not None else bool(config.getini("cudaleak"))


def exact_pools(config):
    return bool(option(config, "cudaleak_exact_pools")) or bool(
        config.getini("cudaleak_exact_pools")
    )


def find_cli(config):
    given = option(config, "cudaleak_bin") or os.environ.get("CUDALEAK_CLI")
    if given:
        return given
    beside = os.path.join(sysconfig.get_path("scripts"), "cudaleak")
    if os.path.isfile(beside):
        return beside
    found = shutil.which("cudaleak")
    if not found:
        raise pytest.UsageError(
            "cudaleak: the cudaleak command is not installed here (pip install cudaleak), "
            "not on PATH, and neither --cudaleak-bin nor CUDALEAK_CLI names it"
        )
    return found


class Shim:
    """The shim's control functions, from the process (it is preloaded)."""

    def __init__(self):
        lib = ctypes.CDLL(None)
        self.mark = lib.cudaleak_mark
        self.mark.restype = ctypes.c_uint64
        self.mark.argtypes = []
        self._live_since = lib.cudaleak_live_since
        self._live_since.restype = ctypes.c_int
        self._live_since.argtypes = [ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]
        self.restart_peak = lib.cudaleak_restart_peak
        self.restart_peak.restype = None
        self.restart_peak.argtypes = []
        self.peak_bytes = lib.cudaleak_peak_bytes
        self.peak_bytes.restype = ctypes.c_uint64
        self.peak_bytes.argtypes = []
        self._dump = lib.cudaleak_dump
        self._dump.restype = ctypes.c_int
        self._dump.argtypes = [ctypes.c_char_p]

    @staticmethod
    def loaded():
        try:
            ctypes.CDLL(None).cudaleak_mark
        except AttributeError:
            return False
        return True

    def live_since(self, mark):
        out = (ctypes.c_uint64 * 2)()
        if self._live_since(mark, out) != 0:
            return 0, 0
        return out[0], out[1]

    def dump(self, path):
        if self._dump(os.fsencode(path)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cudaleak: could not write a dump to {path}")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Starts pytest again under the shim when it is not preloaded: before any conftest or
    test module is imported, so before the session touches CUDA."""
    if not enabled(early_config) or Shim.loaded():
        return
    if os.environ.get(REEXEC_VAR):
        raise pytest.UsageError(
            "cudaleak: pytest was started again with the shim in LD_PRELOAD, but it did not "
            "load (see the loader's message above)"
        )
    env_options = ["--run-in", option(early_config, "cudaleak_out") or "cudaleak-out"]
    if exact_pools(early_config):
        env_options.append("--exact-pools")
    called_at = started_from_python()
    if called_at is not None:
        raise pytest.UsageError(cannot_start_again(early_config, called_at, env_options))
    cmd = [find_cli(early_config), "env", "--json", *env_options]
    got = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if got.returncode != 0:
        raise pytest.UsageError(f"cudaleak: {' '.join(cmd)} failed: {got.stderr.strip()}")
    env = dict(os.environ)
    env.update(json.loads(got.stdout))
    env[REEXEC_VAR] = "1"
    # The exit line of each process ("N allocations still live at exit") is not the verdict
    # here: the tests are.
    env.setdefault("CUDALEAK_QUIET", "1")
    argv = [sys.executable, *interpreter_options(), *program(), *sys.argv[1:]]
    # pytest has pointed fds 1 and 2 at its capture files by now: give them back, or the new
    # pytest would write into files nobody reads.
    capture = early_config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def started_from_python():
    """Where `pytest.main(...)` was called (`wrapper.py:7`) when a program of its own made this
    session; None when it is pytest's command line (`pytest`, `python -m pytest`: pytest's console
    entry, which reads `sys.argv`), so that the same program started again makes the same
    session. A program's session cannot be made again: `python -m pytest` would lose the
    program's plugin objects and setup, and the program started again would run its own code
    twice.

    The entry is the outermost frame of pytest's (and pluggy's) own code below this hook: a test
    that runs pytest inside pytest enters through `pytest.main`, whatever started the outer one.
    Named, not compared with the function: pytest 9 moved its entry to `_console_main`."""
    own = tuple(os.path.dirname(m.__file__) + os.sep for m in (sys.modules["_pytest"], pluggy))
    entry = None
    frame = sys._getframe(2)  # the hook's caller, in pluggy
    while frame is not None and frame.f_code.co_filename.startswith(own):
        entry = frame
        frame = frame.f_back
    if entry is not None and entry.f_code.co_name in ("console_main", "_console_main"):
        return None
    if frame is None:
        return "?"
    return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"


def cannot_start_again(config, called_at, env_options):
    """The refusal of a session that `pytest.main(...)` started: what would be lost, and the
    commands that preload the shim from the start instead."""
    objects = [p for p in config.invocation_params.plugins or () if not isinstance(p, str)]
    given = ""
    if objects:
        names = ", ".join(getattr(p, "__name__", None) or type(p).__qualname__ for p in objects)
        given = f" with the plugin object{'s' if len(objects) > 1 else ''} {names}"
    started = command_line(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    env = command_line(["cudaleak", "env", *env_options])
    return (
        f"cudaleak: pytest was started by pytest.main() at {called_at}{given}, not by pytest's "
        "command line, so it cannot be started again under the shim: `python -m pytest` would "
        "lose what the program gives pytest, and the program started again would run its own "
        f"code twice. Preload the shim from the start instead: `env $({env}) {started}`, or "
        f"`cudaleak run -- {started}` (which also reports what the program left at exit)"
    )


def command_line(argv):
    return " ".join(shlex.quote(a) for a in argv)


def program():
    """What the running interpreter was told to run, to tell the new one the same: `-m MODULE`
    (`python -m pytest`), else the script (the `pytest` command is one: run again as itself, not
    as `python -m pytest`, its directory stays first on `sys.path`, not the working directory)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    # A zip file or a directory run as a script has a spec named __main__: it is a script.
    if spec is not None and spec.name != "__main__":
        name = spec.name
        return ["-m", name[: -len(".__main__")] if name.endswith(".__main__") else name]
    if sys.argv and sys.argv[0] not in ("-c", "-") and os.path.exists(sys.argv[0]):
        return [sys.argv[0]]
    return ["-m", "pytest"]  # `python -c` that called pytest.console_main()


def interpreter_options():
    """The interpreter's own options that give the new interpreter this one's settings: `-O`,
    `-B`, `-I`, `-P`, `-W` (`sys.warnoptions`), `-X` (`sys._xoptions`), `-u` and the rest. What
    the environment set (PYTHONOPTIMIZE, PYTHONWARNINGS ...) is given again too; that is
    harmless: the new interpreter applies the same setting twice."""
    try:
        # CPython's own, for the child interpreters of its tests (in PyPy's standard library too).
        options = subprocess._args_from_interpreter_flags()
    except (AttributeError, ValueError):
        # Missing, or sys.warnoptions changed since start-up so that it no longer holds what
        # -b or -X dev put there: the flags one by one, every warning option as it is.
        options = [
            "-" + letter * getattr(sys.flags, name, 0)
            for name, letter in FLAG_OPTIONS
            if getattr(sys.flags, name, 0)
        ]
        options += ["-W" + w for w in sys.warnoptions]
    # CPython passes on only the -X options its tests need (faulthandler, dev, utf8 ...).
    given = {options[i + 1].split("=", 1)[0] for i, o in enumerate(options[:-1]) if o == "-X"}
    for name, value in getattr(sys, "_xoptions", {}).items():
        if name not in given:
            options += ["-X", name if value is True else f"{name}={value}"]
    # -u leaves the standard streams' binary layer unbuffered (sys.flags does not say it).
    if isinstance(getattr(sys.__stdout__, "buffer", None), io.FileIO):
        options.append("-u")
    if sys.flags.interactive:
        options.append("-i")
    mode = getattr(sys.modules.get("_imp"), "check_hash_based_pycs", "default")
    if mode != "default":
        options += ["--check-hash-based-pycs", mode]
    return options


# The sys.flags that an option sets, and the option (-OO, -vv, -bb: repeated for a level).
FLAG_OPTIONS = (
    ("optimize", "O"),
    ("debug", "d"),
    ("dont_write_bytecode", "B"),
    ("no_site", "S"),
    ("verbose", "v"),
    ("bytes_warning", "b"),
    ("quiet", "q"),
    ("isolated", "I"),
    ("ignore_environment", "E"),
    ("no_user_site", "s"),
    ("safe_path", "P"),
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "cuda_limit_leaks(limit, warmups=0): fail when the test leaves more than LIMIT of GPU "
        "memory allocated (after running its body WARMUPS times first)",
    )
    config.addinivalue_line(
        "markers",
        "cuda_limit_memory(limit): fail when the test's peak of live GPU memory exceeds LIMIT",
    )
    if not enabled(config):
        return
    if not Shim.loaded():
        raise pytest.UsageError(
            "cudaleak: the shim is not preloaded in this process (run pytest with --cudaleak "
            "on its command line, or under the environment `cudaleak env` prints)"
        )
    config.pluginmanager.register(Checker(config), "cudaleak-checker")


class Checker:
    def __init__(self, config):
        self.config = config
        self.shim = Shim()
        self.cli = find_cli(config)
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        # The run directory `cudaleak env --run-in` made before pytest started again (xdist's
        # workers inherit it); a session someone preloaded by hand has none: its test dumps go
        # to a temporary directory, removed at the end.
        run_dir = os.environ.get("CUDALEAK_OUTPUT", "").rstrip("/")
        self.keep = bool(run_dir) and os.path.isdir(run_dir)
        self.dir = run_dir if self.keep else tempfile.mkdtemp(prefix="cudaleak-pytest-")
        self.dumps = 0
        self.tensors = TorchTensors()
        self.rows = []  # (nodeid, leaked bytes, top callsite, peak) of the tests that failed

    def pytest_unconfigure(self, config):
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        leaks = item.get_closest_marker("cuda_limit_leaks")
        memory = item.get_closest_marker("cuda_limit_memory")
        warmups = int(leaks.kwargs.get("warmups", 0)) if leaks else 0
        leak_limit = parse_size(marker_arg(leaks, "0 B"))
        memory_limit = parse_size(marker_arg(memory, None)) if memory else None
        seen_before = set()
        count_before = self.tensors.count()
        for _ in range(warmups):
            item.runtest()
        if warmups and self.tensors.count() != count_before:
            # What the warm-up runs made and kept is theirs, not a leak of the judged run. Read
            # only when they changed PyTorch's count: the first read of the allocator's record
            # in a process takes seconds (4.2 s on an H100, docs/validation.md).
            seen_before = self.tensors.live_addresses()
        empty_pools()
        tensors_before = self.tensors.start()
        mark = self.shim.mark()
        self.shim.restart_peak()
        before = self.shim.peak_bytes()  # the window starts at what is live now
        outcome = yield
        peak = self.shim.peak_bytes() - before
        if outcome.excinfo is not None:
            return  # the test failed on its own: what it left is its traceback's
        problems = []
        if memory_limit is not None and peak > memory_limit:
            problems.append(
                f"cudaleak: the test's peak of GPU memory was {human(peak)} ({peak} B) above "
                f"what was live when it started; the limit is {human(memory_limit)} "
                f"(cuda_limit_memory)"
            )
        leaked, text, top, pools = self.judge(item, mark, leak_limit)
        if text:
            problems.append(text)
        if tensors_before is not None and "pytorch-native" not in pools:
            # The driver saw no new segment of PyTorch's pool kept: a tensor kept in a segment
            # that was live before the test shows only in PyTorch's own count.
            kept, text, kept_top = self.tensors.judge(
                item, tensors_before, leak_limit, seen_before
            )
            if text:
                problems.append(text)
                leaked += kept
                top = top or kept_top
        item.user_properties.append(
            ("cudaleak", {"leaked": leaked, "top": top, "peak": peak, "failed": bool(problems)})
        )
        if problems:
            item.stash[PROBLEMS] = "\n\n".join(problems)

    def judge(self, item, mark, limit):
        """(leaked bytes, failure text or None, top callsite, the pools of the leaks) of the
        blocks the test left at the driver."""
        blocks, nbytes = self.shim.live_since(mark)
        if blocks == 0:
            return 0, None, None, set()
        gc.collect()
        empty_pools()
        blocks, nbytes = self.shim.live_since(mark)
        if blocks == 0:
            return 0, None, None, set()
        self.dumps += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name)[:80]
        path = os.path.join(self.dir, f"test.{self.worker}.{self.dumps}.{name}.json")
        self.shim.dump(path)
        cmd = [
            self.cli,
            "report",
            "--format",
            "json",
            "--since",
            str(mark),
            "--pools-emptied",
            "--fail-on",
            self.config.getoption("cudaleak_fail_on"),
            "--max-leaked-bytes",
            str(limit),
            "--exit-code",
            str(GATE_FAILED),
        ]
        suppressions = self.config.getoption("cudaleak_suppressions")
        if suppressions:
            cmd += ["--suppressions", suppressions]
        cmd.append(path)
        got = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if got.returncode not in (0, GATE_FAILED):
            failed = f"cudaleak: {' '.join(cmd)} failed ({got.returncode}):\n{got.stderr}"
            return 0, failed, None, set()
        doc = json.loads(got.stdout)
        leaks = doc.get("leaks", [])
        leaked = sum(g["bytes"] for g in leaks)
        root = str(self.config.rootpath)
        top = callsite(leaks[0], item.originalname, root) if leaks else None
        if got.returncode != GATE_FAILED:
            return leaked, None, top, set()
        pools = {g["cache"] for g in leaks if g.get("cache")}
        lines = [
            f"cudaleak: the test left {human(leaked)} ({leaked} B) of GPU memory allocated "
            f"in {plural(sum(g['allocations'] for g in leaks), 'block')}"
            + (f" (the limit is {human(limit)})" if limit else "")
            + ":"
        ]
        for i, g in enumerate(leaks, 1):
            lines.append("")
            lines.extend(describe(i, len(leaks), g, root))
        if self.keep:
            lines.append("")
            lines.append(
                f"the dump: {path} (cudaleak report --since {mark} --pools-emptied {path})"
            )
        return leaked, "\n".join(lines), top, pools

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        problems = item.stash.get(PROBLEMS, None)
        if call.when == "call" and problems and rep.passed:
            rep.outcome = "failed"
            rep.longrepr = problems


PROBLEMS = pytest.StashKey[str]()


def marker_arg(marker, default):
    if marker is None:
        return default
    if marker.args:
        return marker.args[0]
    return marker.kwargs.get("limit", default)


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def frame_text(f, root):
    if "folded_frames" in f:
        return f"({plural(f['folded_frames'], 'frame')} of {', '.join(f.get('modules', []))})"
    where = f.get("file")
    if where and root and where.startswith(root.rstrip("/") + "/"):
        where = where[len(root.rstrip("/")) + 1 :]
    if where and f.get("line"):
        where = f"{where}:{f['line']}"
    name = f.get("function") or "??"
    if where:
        return f"{name} at {where}"
    return f"{name} in {f.get('module') or '??'}"


def is_python(f):
    return f.get("kind") == "python"


def callsite(g, test, root):
    """The test's own line of a leak group: the frame of the test function, else the first
    Python frame, else the first frame."""
    frames = [f for f in g.get("frames", []) if "folded_frames" not in f]
    python = [f for f in frames if is_python(f)]
    own = [f for f in python if f.get("function") == test]
    best = (own or python or frames or [None])[0]
    return frame_text(best, root) if best else g.get("api", "?")


def describe(i, n, g, root):
    head = (
        f"Leak {i} of {n}: {human(g['bytes'])} in {plural(g['allocations'], 'allocation')} "
        f"via {g['api']}"
    )
    if g.get("cache"):
        head += f" (still held by the {g['cache']} pool after it was emptied: kept by the test)"
    out = [head]
    # Innermost first, as `cudaleak report` writes them: the runs of native and framework
    # frames folded, the program's Python lines whole.
    for f in g.get("frames", []):
        out.append("    " + frame_text(f, root))
    return out


class TorchTensors:
    """PyTorch's own count of its tensors, for the leak the driver cannot see: a tensor kept in a
    segment of the caching allocator that was live before the test (the pool had room for it).
    `torch.cuda.memory_allocated()` counts it; the allocator's record of live blocks
    (`torch.cuda.memory._record_memory_history`, its state only, Python stacks at allocation)
    names the test's line. Only for the native allocator: with `backend:cudaMallocAsync`
    (`--cudaleak-exact-pools`) every tensor is its own driver allocation and the shim sees it."""

    def __init__(self):
        self.recording = None  # None: not tried yet; False: PyTorch refused
        self.reported = set()  # addresses of the blocks an earlier test was failed for

    @staticmethod
    def torch():
        """PyTorch, when the test session imported it, CUDA is initialised and the native
        caching allocator serves the tensors; else None."""
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            if not torch.cuda.is_initialized():
                return None
            if torch.cuda.get_allocator_backend() != "native":
                return None
        except Exception:  # noqa: BLE001 - a framework's failure is not the test's
            return None
        return torch

    def start(self):
        """PyTorch's count of allocated bytes as a test starts (None: nothing to count), after
        turning on the allocator's record of live blocks the first time."""
        torch = self.torch()
        if torch is None:
            return None
        if self.recording is None:
            try:
                torch.cuda.memory._record_memory_history(
                    enabled="state", context="alloc", stacks="python"
                )
                self.recording = True
            except Exception:  # noqa: BLE001
                self.recording = False
        return self.allocated(torch)

    def count(self):
        """PyTorch's count of allocated bytes, or None when there is nothing to count."""
        torch = self.torch()
        return None if torch is None else self.allocated(torch)

    @staticmethod
    def allocated(torch):
        try:
            return sum(torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count()))
        except Exception:  # noqa: BLE001
            return 0

    def live_blocks(self):
        """The allocator's live blocks as (address, bytes, frames), frames innermost first."""
        torch = self.torch()
        if torch is None or not self.recording:
            return []
        try:
            segments = torch.cuda.memory._snapshot()["segments"]
        except Exception:  # noqa: BLE001
            return []
        out = []
        for seg in segments:
            for b in seg.get("blocks", []):
                if b.get("state") != "active_allocated":
                    continue
                frames = list(b.get("frames") or [])
                # PyTorch writes the innermost frame first; should one write them the other
                # way, the interpreter's entry would come first.
                if frames and is_entry(frames[0]) and not is_entry(frames[-1]):
                    frames.reverse()
                out.append((b.get("address"), b.get("size", 0), frames))
        return out

    def live_addresses(self):
        return {address for address, _, _ in self.live_blocks()}

    def judge(self, item, before, limit, seen_before):
        """(kept bytes, failure text or None, top callsite) of the tensors the test left in
        PyTorch's pool, by PyTorch's own count."""
        torch = self.torch()
        if torch is None:
            return 0, None, None
        grown = self.allocated(torch) - before
        if grown <= limit:
            return 0, None, None
        gc.collect()
        empty_pools()
        grown = self.allocated(torch) - before
        if grown <= limit:
            return 0, None, None
        test, path = item.originalname, str(getattr(item, "path", "") or item.fspath)
        root = str(item.config.rootpath)
        groups = {}  # the frames from the test's own down -> [bytes, blocks]
        for address, size, frames in self.live_blocks():
            if address in seen_before or address in self.reported:
                continue
            own = next(
                (
                    i
                    for i, f in enumerate(frames)
                    if f.get("name") == test and f.get("filename") == path
                ),
                None,
            )
            if own is None:
                continue
            self.reported.add(address)
            key = tuple(
                (f.get("filename"), f.get("line"), f.get("name")) for f in frames[: own + 1]
            )
            g = groups.setdefault(key, [0, 0])
            g[0] += size
            g[1] += 1
        lines = [
            f"cudaleak: the test left {human(grown)} ({grown} B) of PyTorch tensors allocated, "
            f"inside segments of PyTorch's caching allocator that were live before it "
            f"(torch.cuda.memory_allocated() grew by {grown} B)"
        ]
        if not groups:
            lines[0] += "."
            lines.append(
                "No line is known: PyTorch kept no Python stack for these blocks. "
                "--cudaleak-exact-pools gives each tensor its own driver allocation, "
                "seen with its stack."
            )
            return grown, "\n".join(lines), None
        lines[0] += ":"
        lines.append("")
        ordered = sorted(groups.items(), key=lambda kv: -kv[1][0])
        for i, (key, (nbytes, blocks)) in enumerate(ordered, 1):
            lines.append(
                f"Leak {i} of {len(ordered)}: {human(nbytes)} in {plural(blocks, 'allocation')} "
                f"via torch (caching allocator, native backend)"
            )
            lines.extend("    " + text for text in torch_frames(key, root))
        first = ordered[0][0][-1]
        top = frame_text({"function": first[2], "file": first[0], "line": first[1]}, root)
        return grown, "\n".join(lines), top


def is_entry(frame):
    """A frame of the interpreter's or pytest's entry, never the innermost of an allocation."""
    name = frame.get("filename") or ""
    return "/_pytest/" in name or "/pluggy/" in name or name.endswith("runpy.py")


def torch_frames(key, root):
    """An allocation's Python frames, innermost first, from the test's own line down to the
    allocation: the runs inside PyTorch's package folded as `cudaleak report` folds them."""
    out = []
    folded = 0
    for filename, line, name in key:
        if "/torch/" in (filename or ""):
            folded += 1
            continue
        if folded:
            out.append(frame_text({"folded_frames": folded, "modules": ["torch"]}, root))
            folded = 0
        out.append(frame_text({"function": name, "file": filename, "line": line}, root))
    if folded:
        out.append(frame_text({"folded_frames": folded, "modules": ["torch"]}, root))
    return out


def empty_pools():
    """Gives back what the frameworks' pools hold that no object uses, so that what is still
    allocated after a test is what its objects keep (each pool's `empty` line in
    `cudaleak report --list-caches`). Only frameworks already imported are touched."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                # cuBLAS's workspaces live in the caching allocator, one per handle and stream,
                # made at a test's first matrix product: PyTorch's count would blame that test.
                clear_workspaces = getattr(
                    getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None
                )
                if clear_workspaces is not None:
                    clear_workspaces()
                torch.cuda.empty_cache()
                host_empty = getattr(torch._C, "_host_emptyCache", None)
                if host_empty is not None:
                    host_empty()
        except Exception:  # noqa: BLE001 - a framework's failure is not the test's
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001
            pass


# What `cudaleak run` says when a program fails and no driver can be found (NO_DRIVER_NOTE in
# cli/src/run.rs), in this plugin's words: without it a session without a driver is only many
# `assert 35 == 0` (cudaErrorInsufficientDriver) and "no GPU memory leaked".
NO_DRIVER_NOTE = (
    "note: no CUDA driver (libcuda.so.1) was found on this machine, so CUDA calls fail "
    "(cudaErrorInsufficientDriver, 35); to run these tests on the null device without a GPU, "
    "put its directory first on LD_LIBRARY_PATH: see \"Without a GPU: the null device\" in "
    "cudaleak's README.md"
)
DRIVER = "libcuda.so.1"
DRIVER_DIRS = (
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/wsl/lib",
)


def driver_found():
    """Whether libcuda.so.1 is loaded in this process or can be found as the loader looks for it
    (the CLI's `driver_found`: LD_LIBRARY_PATH, the usual directories, /etc/ld.so.cache). A name
    search, never a dlopen: loading a driver here would change the process under test."""
    try:
        with open("/proc/self/maps") as maps:
            if any(line.rstrip().endswith("/" + DRIVER) for line in maps):
                return True
    except OSError:
        pass
    listed = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    if any(os.path.exists(os.path.join(d, DRIVER)) for d in listed + list(DRIVER_DIRS)):
        return True
    try:
        with open("/etc/ld.so.cache", "rb") as cache:
            return DRIVER.encode() + b"\0" in cache.read()
    except OSError:
        return False


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not enabled(config):
        return
    checked = 0
    rows = []
    for rep in terminalreporter.stats.get("failed", []) + terminalreporter.stats.get(
        "passed", []
    ):
        if rep.when != "call":
            continue
        for key, value in getattr(rep, "user_properties", []):
            if key != "cudaleak":
                continue
            checked += 1
            if value["failed"]:
                rows.append((rep.nodeid, value))
    tr = terminalreporter
    tr.section("cudaleak")
    run_dir = os.environ.get("CUDALEAK_OUTPUT", "").rstrip("/")
    if run_dir and os.path.isdir(run_dir):
        tr.write_line(f"dumps: {run_dir} (cudaleak report {run_dir}: what the session left at exit)")
    if exitstatus != 0 and not driver_found():
        tr.write_line(NO_DRIVER_NOTE)
    if not rows:
        tr.write_line(f"{plural(checked, 'test')} checked: no GPU memory leaked")
        return
    tr.write_line(
        f"{plural(checked, 'test')} checked, {len(rows)} over a limit "
        f"({human(sum(v['leaked'] for _, v in rows))} leaked):"
    )
    width = max(len(n) for n, _ in rows)
    for nodeid, v in sorted(rows, key=lambda r: -r[1]["leaked"]):
        top = v["top"] or f"peak {human(v['peak'])} (cuda_limit_memory)"
        tr.write_line(f"  {nodeid:<{width}}  {human(v['leaked']):>10}  {top}")
