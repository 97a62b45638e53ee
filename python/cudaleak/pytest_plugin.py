"""pytest plugin: fail the test that leaks GPU memory, with the line that allocated it.

`pytest --cudaleak` (or `cudaleak = true` in the ini file) runs the session with the cudaleak
shim preloaded: when it is not, pytest is started again under it before any test module or
conftest is imported, so before CUDA is touched (the same program, interpreter options and
arguments; a session that `pytest.main()` started cannot be made again: the shim is attached in
that process instead, as `cudaleak.track()` does). Around each test's call the plugin asks the
shim which blocks were allocated during the call and are still live when it returns (after
`gc.collect()` and emptying the frameworks' pools), and PyTorch whether its count grew (a tensor
kept inside a segment that was live before: its own record names the line); when either did, it
writes a dump and lets `cudaleak report --since MARK --pools-emptied` judge it, with the CLI's
rules: blocks held by caches and library handles are not the test's leak (`--cudaleak-fail-on
strict` counts them), `leak:` lines of `--cudaleak-suppressions` apply. A test that leaks fails
with the CLI's own report of its window.

Markers (as pytest-memray's, for GPU memory):

    @pytest.mark.cuda_limit_leaks("1 MB", warmups=1)   # tolerate up to 1 MB; run the body
                                                       # once first so lazy state settles
    @pytest.mark.cuda_limit_memory("512 MB")           # fail above this peak of live bytes

docs/pytest.md describes the plugin; README.md shows how to install it.
"""

import gc
import importlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pluggy
import pytest

from . import _bootstrap, _frameworks, _names, _shim, _sizes

# The CLI's exit status when the gate fails (`cudaleak report --exit-code`).
GATE_FAILED = 23


def parse_size(text):
    """A marker's size (`"1 MB"`), as the CLI reads sizes (cudaleak/_sizes.py)."""
    try:
        return _sizes.parse_size(text)
    except ValueError as e:
        raise pytest.UsageError(f"cudaleak: {e}") from None


human = _sizes.human


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
    try:
        return _shim.find_cli(option(config, "cudaleak_bin"))
    except _shim.CudaleakError:
        raise pytest.UsageError(
            "cudaleak: the cudaleak command is not installed here (pip install cudaleak), "
            "not on PATH, and neither --cudaleak-bin nor CUDALEAK_CLI names it"
        ) from None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """Starts pytest again under the shim when it is not preloaded: before any conftest or
    test module is imported, so before the session touches CUDA. (Usually done already, as this
    module was imported: `restart_early`.)"""
    if not enabled(early_config):
        return
    bin_option = option(early_config, "cudaleak_bin")
    _names.names(bin_option)  # the shared names, asked of --cudaleak-bin's CLI when given
    # Set in the environment of the pytest started again under the shim, so a shim that
    # failed to load is an error, not a loop.
    reexec = _names.var("pytest_reexec")
    given = os.environ.get(reexec, "")
    settings = restart_settings(
        exact_pools(early_config), option(early_config, "cudaleak_out"), bin_option
    )
    env = dict(os.environ)
    if _shim.preloaded():
        if not given.startswith(EARLY):
            return
        pid, assumed, before = json.loads(given[len(EARLY) :])
        if pid != os.getpid() or assumed == settings:
            return  # a child's pytest, under its parent's session; or as assumed
        # The ini file (its `cudaleak_exact_pools`, its `addopts`) asked for what the command
        # line did not say: started once more, from the environment pytest was first given.
        for name, value in before.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        unused = os.environ.get(_names.var("output"), "")  # the first start's run directory
        if unused:
            shutil.rmtree(unused, ignore_errors=True)
    elif given:
        raise pytest.UsageError(
            "cudaleak: pytest was started again with the shim in LD_PRELOAD, but it did not "
            "load (see the loader's message above)"
        )
    elif started_from_python() is not None:
        # pytest.main() from a program of its own: the session cannot be made again, so the
        # shim is loaded into this process and attached (pytest_configure), as
        # `cudaleak.track()` does: each test's blocks are seen, whatever came before is not.
        return
    try:
        cli = _shim.find_cli(bin_option)
        env = shim_environment(cli, settings, env)
    except _shim.CudaleakError as e:
        raise pytest.UsageError(str(e)) from None
    env[reexec] = "1"
    # pytest has pointed fds 1 and 2 at its capture files by now: give them back, or the new
    # pytest would write into files nobody reads.
    capture = early_config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    start_again(env)


# The value of the restart variable that `restart_early` sets, before its pid, what it assumed
# and the environment it changed.
EARLY = "early "


def restart_settings(exact, out, cli):
    """What the environment of the pytest started again depends on."""
    return [bool(exact), out or "cudaleak-out", cli]


def shim_environment(cli, settings, env):
    """ENV with `cudaleak env`'s variables for SETTINGS (a fresh run directory, the shim
    preloaded, the allocators' variables of --exact-pools). Raises CudaleakError."""
    exact, out, _ = settings
    cmd = [cli, "env", "--json", "--run-in", out]
    if exact:
        cmd.append("--exact-pools")
    try:
        got = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_shim.cli_environment(),
        )
    except OSError as e:
        raise _shim.CudaleakError(f"cudaleak: {' '.join(cmd)} failed: {e}") from None
    if got.returncode != 0:
        raise _shim.CudaleakError(f"cudaleak: {' '.join(cmd)} failed: {got.stderr.strip()}")
    env = dict(env)
    env.update(json.loads(got.stdout))
    # The exit line of each process ("N allocations still live at exit") is not the verdict
    # here: the tests are.
    env.setdefault(_names.var("quiet"), "1")
    return env


def start_again(env):
    """Replaces this process with the same pytest, in ENV."""
    argv = [sys.executable, *interpreter_options(), *program(), *sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def restart_early():
    """At this module's import (pytest imports its plugins before it reads its options):
    pytest started again under the shim at once when its command line says `--cudaleak`,
    rather than after every other installed plugin was imported, which the new process does
    again (hypothesis's plugin alone takes about a second). What only pytest's full parse
    knows (an ini file's `cudaleak_exact_pools`, its `addopts`) is compared in the new process
    with what was assumed here (`pytest_load_initial_conftests`), which starts it once more
    where they differ. Any doubt leaves it to that hook."""
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + sys.argv[1:]
    if "--" in args:
        args = args[: args.index("--")]
    # Frame 0 is this function, 1 the module being run, 2 the import machinery's.
    if "--cudaleak" not in args or not console_session(sys._getframe(2)):
        return
    cli_option = last_value(args, "--cudaleak-bin")
    _names.names(cli_option)
    reexec = _names.var("pytest_reexec")
    if os.environ.get(reexec) or _shim.preloaded():
        return
    settings = restart_settings(
        "--cudaleak-exact-pools" in args, last_value(args, "--cudaleak-out"), cli_option
    )
    env = shim_environment(_shim.find_cli(cli_option), settings, os.environ)
    before = {k: os.environ.get(k) for k, v in env.items() if os.environ.get(k) != v}
    # execve keeps the pid: a child process that inherits the variable is not this one.
    env[reexec] = EARLY + json.dumps([os.getpid(), settings, before])
    start_again(env)


def last_value(args, name):
    """The value of option NAME in ARGS (`--name VALUE` or `--name=VALUE`; the last wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


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
    entry, frame = outermost_pytest_frame(sys._getframe(2))  # the hook's caller, in pluggy
    if entry is not None and entry.f_code.co_name in CONSOLE_ENTRIES:
        return None
    if frame is None:
        return "?"
    return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"


CONSOLE_ENTRIES = ("console_main", "_console_main")


def outermost_pytest_frame(frame, also=()):
    """(the outermost frame of pytest's and pluggy's code, and of ALSO's, from FRAME outwards;
    the frame that called it), either None."""
    own = tuple(os.path.dirname(m.__file__) + os.sep for m in (sys.modules["_pytest"], pluggy))
    own += also
    entry = None
    while frame is not None and frame.f_code.co_filename.startswith(own):
        entry = frame
        frame = frame.f_back
    return entry, frame


def console_session(frame):
    """Whether FRAME, importing this module, runs in pytest's command line's session (not a
    program's `pytest.main()`): the import machinery and pytest's own code down to its console
    entry."""
    importing = (os.path.dirname(importlib.__file__) + os.sep, "<frozen importlib")
    entry, _ = outermost_pytest_frame(frame, importing)
    return entry is not None and entry.f_code.co_name in CONSOLE_ENTRIES


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
    if not _shim.preloaded() and started_from_python() is None:
        raise pytest.UsageError(
            "cudaleak: the shim is not preloaded in this process (run pytest with --cudaleak "
            "on its command line, or under the environment `cudaleak env` prints)"
        )
    config.pluginmanager.register(Checker(config), "cudaleak-checker")


class Checker:
    def __init__(self, config):
        self.config = config
        self.cli = find_cli(config)
        try:
            # Preloaded, or (a session pytest.main() started) loaded and attached now.
            self.shim = _shim.get(self.cli)
        except _shim.CudaleakError as e:
            raise pytest.UsageError(str(e)) from None
        # The shim's code watcher (3.12+), by `cudaleak run`'s bootstrap if it is here: it
        # adds it once.
        (sys.modules.get("_cudaleak_bootstrap") or _bootstrap).watch_code()
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        # The run directory `cudaleak env --run-in` made before pytest started again (xdist's
        # workers inherit it); a session without one (preloaded by hand, or attached) writes
        # its test dumps into a temporary directory, removed at the end.
        run_dir = os.environ.get(_names.var("output"), "").rstrip("/")
        self.keep = bool(run_dir) and os.path.isdir(run_dir) and not self.shim.attached
        self.dir = run_dir if self.keep else tempfile.mkdtemp(prefix="cudaleak-pytest-")
        self.dumps = 0
        # Blocks of PyTorch's an earlier test was failed for: not blamed again.
        self.reported = set()
        #: What the checks of the test being run cost (`Cost`).
        self.cost = None

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
        self.cost = cost = {
            "before_s": 0.0,
            "after_s": 0.0,
            "emptied": 0,
            "judged": 0,
            # Parts of after_s, and why the pools were emptied (for `gpu-pytest.sh --cost`).
            "gc_s": 0.0,
            "empty_s": 0.0,
            "cli_s": 0.0,
            "why": None,
        }
        t0 = time.perf_counter()
        self.shim.refresh()  # an attached shim: the modules imported since the last test
        count_before = _frameworks.count()
        if warmups:
            cost["before_s"] += time.perf_counter() - t0
            for _ in range(warmups):
                item.runtest()
            t0 = time.perf_counter()
        _frameworks.start_window()
        # PyTorch's record is turned on at the first test; what warm-up runs made and kept is
        # theirs, not the judged run's: read only when they changed PyTorch's count (the
        # record's first read in a process can be slow).
        window = _frameworks.TorchWindow.start(
            read_live=bool(warmups) and _frameworks.count() != count_before
        )
        mark = self.shim.mark()
        self.shim.restart_peak()
        before = self.shim.peak_bytes()  # the window starts at what is live now
        cost["before_s"] += time.perf_counter() - t0
        outcome = yield
        t0 = time.perf_counter()
        try:
            self.after_call(item, outcome, before, mark, leak_limit, memory_limit, window)
        finally:
            cost["after_s"] += time.perf_counter() - t0
            item.user_properties.append(("cudaleak-cost", cost))

    def after_call(self, item, outcome, before, mark, leak_limit, memory_limit, window):
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
        leaked, text, top = self.judge(item, mark, leak_limit, window)
        if text:
            problems.append(text)
        item.user_properties.append(
            ("cudaleak", {"leaked": leaked, "top": top, "peak": peak, "failed": bool(problems)})
        )
        if problems:
            item.stash[PROBLEMS] = "\n\n".join(problems)

    def judge(self, item, mark, limit, window):
        """(leaked bytes, failure text or None, top callsite) of what the test left: blocks
        at the driver, and tensors PyTorch's own record names in segments that were live
        before (the driver cannot see those). The CLI judges and words both.

        The cheap checks first; when they see something, the young objects are collected and
        the pools emptied, and only what is still there is dumped and judged. A full collection
        (80-150 ms in a process that imported PyTorch) is made only before a failure: it can
        only free more, so a test the CLI passed stays passed without it."""
        cost = self.cost
        _frameworks.end_window()
        why = self.left_something(mark, window, limit)
        if why is None:
            return 0, None, None
        cost["emptied"] = 1
        cost["why"] = why
        records, left = self.settle(YOUNG, item, mark, limit, window)
        if left is None:
            return 0, None, None
        leaked, text, top = self.verdict(item, mark, limit, records)
        if text is None:
            return leaked, None, top
        # A failure: made only after a full collection. It can only free more; the test is
        # judged again only when it did.
        records, after = self.settle(OLDEST, item, mark, limit, window)
        if after is None:
            return 0, None, None
        if after != left:
            leaked, text, top = self.verdict(item, mark, limit, records)
        if text is not None and window is not None:
            self.reported.update(window.addresses)
        return leaked, text, top

    def settle(self, generation, item, mark, limit, window):
        """Collects GENERATION and empties the pools; then (PyTorch's records of the tensors
        the test kept, what is still live of the test's: its driver blocks and the records'
        bytes), or (None, None) when nothing is."""
        cost = self.cost
        t0 = time.perf_counter()
        gc.collect(generation)
        t1 = time.perf_counter()
        _frameworks.empty_pools()
        cost["gc_s"] += t1 - t0
        cost["empty_s"] += time.perf_counter() - t1
        records = None
        if window is not None:
            records = window.records(self.shim, mark, limit, owned=self.owned_by(item))
        live = self.shim.live_since(mark)
        if live[0] == 0 and not records:
            return None, None
        kept = sum(g.get("bytes", 0) for r in records or () for g in r["groups"])
        return records, (live, kept)

    def verdict(self, item, mark, limit, records):
        """Writes the test's dump and asks the CLI for its verdict (`judge`)."""
        t0 = time.perf_counter()
        try:
            return self.ask_cli(item, mark, limit, records)
        finally:
            self.cost["cli_s"] += time.perf_counter() - t0
            self.cost["judged"] += 1

    def ask_cli(self, item, mark, limit, records):
        self.dumps += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.name)[:80]
        path = os.path.join(self.dir, f"test.{self.worker}.{self.dumps}.{name}.json")
        self.shim.dump(path, records)
        args = [
            "report",
            "--since",
            str(mark),
            "--pools-emptied",
            "--color",
            "never",
            "--fail-on",
            self.config.getoption("cudaleak_fail_on"),
            "--max-leaked-bytes",
            str(limit),
            "--exit-code",
            str(GATE_FAILED),
        ]
        suppressions = self.config.getoption("cudaleak_suppressions")
        if suppressions:
            args += ["--suppressions", suppressions]
        try:
            _, out = _shim.run_cli(self.cli, [*args, "--format", "json", path], ok=(0, GATE_FAILED))
        except _shim.CudaleakError as e:
            return 0, str(e), None
        doc = json.loads(out)
        leaks = doc.get("leaks", [])
        leaked = doc.get("summary", {}).get("leaked_bytes", 0)
        top = callsite(leaks[0], item.originalname) if leaks else None
        if not doc.get("gate", {}).get("failed"):
            return leaked, None, top
        # The failure is the CLI's own report of the test's window, word for word.
        status, text = _shim.run_cli(self.cli, [*args, path], ok=(0, GATE_FAILED))
        text = f"cudaleak: the test left GPU memory allocated:\n\n{text.rstrip()}"
        if self.keep:
            text += f"\n\nthe dump: {path} (cudaleak report --since {mark} --pools-emptied {path})"
        return leaked, text, top

    def left_something(self, mark, window, limit):
        """Why the test may have left anything, None when it did not: blocks at the driver, or
        PyTorch's count above where it started (cheap reads; the judging reads only then). New
        blocks that are exactly the segments PyTorch's pool grew by, while its count did not
        grow, are its cache: nothing to empty and judge (emptying them would only make the next
        test allocate its segments again)."""
        grown = 0 if window is None else window.grown()
        if grown > limit:
            return f"PyTorch's count grew by {grown} B"
        blocks, nbytes = self.shim.live_since(mark)
        if blocks == 0:
            return None
        if window is not None and window.pool_grew_by(nbytes):
            return None
        pool = "" if window is None else f", PyTorch's pool grew by {window.pool_growth()} B"
        return f"{plural(blocks, 'new driver block')} of {nbytes} B{pool}"

    def owned_by(self, item):
        """Whether a block PyTorch's record names is the test's: made below its own function
        (not a fixture's, nor an earlier test's kept block already reported)."""
        test = item.originalname
        path = str(getattr(item, "path", "") or item.fspath)
        reported = self.reported

        def owned(block, frames):
            if block.get("address") in reported:
                return False
            return any(f.get("function") == test and f.get("file") == path for f in frames)

        return owned

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        problems = item.stash.get(PROBLEMS, None)
        if call.when == "call" and problems and rep.passed:
            rep.outcome = "failed"
            rep.longrepr = problems


PROBLEMS = pytest.StashKey[str]()

# `gc.collect` generations: the young ones only (objects that have survived fewer than two
# collections: milliseconds), and all.
YOUNG = 1
OLDEST = 2


class Cost:
    """What the plugin's own work around the tests took, summed over the tests' reports (an xdist
    worker's too): seconds before the calls (pools, PyTorch's count, the mark) and after them
    (the checks; for a test that seemed to leave something, `gc.collect()` and emptying the
    pools; for one that still did, its dump and the CLI's verdict). Not included: the shim's
    cost inside the tests, and pytest's start under the shim."""

    def __init__(self, reports):
        self.tests = 0
        self.before = self.after = 0.0
        self.emptied = self.judged = 0
        self.gc = self.empty = self.cli = 0.0
        for rep in reports:
            for key, value in getattr(rep, "user_properties", []):
                if key == "cudaleak-cost":
                    self.tests += 1
                    self.before += value["before_s"]
                    self.after += value["after_s"]
                    self.emptied += value["emptied"]
                    self.judged += value["judged"]
                    self.gc += value.get("gc_s", 0.0)
                    self.empty += value.get("empty_s", 0.0)
                    self.cli += value.get("cli_s", 0.0)

    def line(self):
        """The terminal summary's `checks:` line, or None when no test was checked."""
        if not self.tests:
            return None
        spent = self.before + self.after
        return (
            f"checks: {spent:.2f} s ({spent / self.tests * 1000:.1f} ms a test: "
            f"{self.before:.2f} s before the calls, {self.after:.2f} s after them); "
            f"pools emptied after {plural(self.emptied, 'test')} "
            f"(gc.collect() {self.gc:.2f} s, emptying {self.empty:.2f} s), "
            f"{plural(self.judged, 'dump')} judged by the CLI ({self.cli:.2f} s)"
        )


def marker_arg(marker, default):
    if marker is None:
        return default
    if marker.args:
        return marker.args[0]
    return marker.kwargs.get("limit", default)


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def callsite(g, test):
    """A leak group's line for the session's summary (`test_x at tests/test_a.py:12`): the
    test function's own frame, else the innermost Python frame, else the innermost frame with
    a file."""
    frames = [f for f in g.get("frames", []) if f.get("file") and f.get("line")]
    python = [f for f in frames if f.get("kind") == "python"]
    own = [f for f in python if f.get("function") == test]
    best = (own or python or frames or [None])[0]
    if best is None:
        return g.get("api", "?")
    where = best["file"]
    if os.path.isabs(where):
        where = os.path.relpath(where)
    return f"{best.get('function') or '??'} at {where}:{best['line']}"


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
    cost = Cost(r for reps in tr.stats.values() for r in reps if getattr(r, "when", None) == "call")
    if cost.line():
        tr.write_line(cost.line())
    run_dir = os.environ.get(_names.var("output"), "").rstrip("/")
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


try:
    restart_early()
except Exception:  # noqa: BLE001 - pytest_load_initial_conftests does it, and says what fails
    pass
