"""cudaleak in code: what a block of a running program left on the GPU, at the line that
allocated it, without starting a new process.

    import cudaleak

    with cudaleak.track() as t:
        train_one_epoch(model, loader)
    print(t.report())            # the same words as `cudaleak report`
    t.assert_no_leaks("1 MiB")   # raises cudaleak.LeakError with that report

The shim is loaded into this process the first time (no restart; docs/python-api.md says how),
or the preloaded one is used under `cudaleak run`, `LD_PRELOAD` or the pytest plugin. Every
report is the CLI's own rendering of a dump the shim writes at the block's end: this module
reads the CLI's JSON for the fields it offers and never words a finding itself.
"""

import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time

from . import _frameworks, _shim
from ._shim import CudaleakError

__all__ = [
    "CudaleakError",
    "Diff",
    "Growth",
    "Leak",
    "LeakError",
    "Snapshot",
    "Tracker",
    "diff",
    "snapshot",
    "track",
]

# `cudaleak report`'s exit status when the gate fails (its --exit-code).
GATE_FAILED = 23
# Formats `report` renders (`cudaleak report --help`).
FORMATS = ("text", "json", "markdown", "html", "sarif", "folded")


class LeakError(AssertionError):
    """A tracked block left more GPU memory allocated than allowed. `str(e)` is the CLI's
    report; `e.leaked` the bytes, `e.tracker` the Tracker."""

    def __init__(self, report, leaked, tracker):
        super().__init__(report)
        self.leaked = leaked
        self.tracker = tracker


class Leak:
    """One leak group of a block: live blocks allocated inside it at one callsite with one API,
    as `cudaleak report --format json` lists them (docs/report-format.md, "JSON format")."""

    __slots__ = ("bytes", "allocations", "api", "kind", "device", "frames", "framework", "raw")

    def __init__(self, group):
        #: Bytes the blocks hold.
        self.bytes = group.get("bytes", 0)
        #: How many blocks.
        self.allocations = group.get("allocations", 0)
        #: The function that allocated them as the program called it (`cudaMalloc`, …).
        self.api = group.get("api")
        #: `device`, `managed`, `host`, `async`, … (docs/report-format.md).
        self.kind = group.get("kind")
        #: The device ordinal, when known.
        self.device = group.get("device")
        #: The stack, innermost first: dicts with `function`, `file`, `line`, `module`, and
        #: `kind: "python"` for a Python frame (folded runs: `folded_frames`, `modules`).
        self.frames = group.get("frames", [])
        #: The framework whose own record named these blocks (`torch`), else None: the driver
        #: saw them.
        self.framework = group.get("framework")
        #: The whole group as the CLI wrote it.
        self.raw = group

    @property
    def line(self):
        """`file:line` of the innermost Python frame outside the frameworks and the standard
        library (the program's own line), else of the innermost frame with a file; or None."""
        frames = [f for f in self.frames if f.get("file") and f.get("line")]
        own = [f for f in frames if f.get("kind") == "python" and not _library(f["file"])]
        best = (own or frames or [None])[0]
        return f"{best['file']}:{best['line']}" if best else None

    def __repr__(self):
        return (
            f"Leak(bytes={self.bytes}, allocations={self.allocations}, api={self.api!r}, "
            f"line={self.line!r})"
        )


def _library(path):
    return "-packages/" in path or path.startswith(sys.prefix + "/lib/python") or path.startswith(
        sys.base_prefix + "/lib/python"
    )


class Growth:
    """The growth verdict over the snapshots taken while a block ran (`cudaleak report --growth
    --since`): `suspects`, the callsites whose live bytes grew like a leak, as the CLI's JSON
    lists them (docs/report-format.md, "Growth output": `api`, `growth_bytes`, `frames` …);
    `snapshots`, how many dumps it judged; `doc`, the whole JSON."""

    def __init__(self, doc, snapshots, tracker):
        self.doc = doc
        self.snapshots = snapshots
        self._tracker = tracker

    @property
    def suspects(self):
        return [
            c
            for p in self.doc.get("processes", [])
            for c in p.get("callsites", [])
            if c.get("suspect")
        ]

    def report(self, format="text", **options):
        """The CLI's growth report in FORMAT."""
        return self._tracker._render(format, growth=True, **options)

    def __bool__(self):
        return bool(self.suspects)

    def __repr__(self):
        return f"Growth(suspects={len(self.suspects)}, snapshots={self.snapshots})"


class Tracker(contextlib.ContextDecorator):
    """What a block leaves allocated on the GPU. Use `cudaleak.track()`."""

    def __init__(self, limit=None, snapshot_every=5.0, cli=None, fail_on="all"):
        self.limit = limit
        self.snapshot_every = snapshot_every
        self.fail_on = fail_on
        self._cli = cli
        self._reset()

    def _reset(self):
        self.mark = None
        self.dump_path = None
        self._doc = None
        self._snapshots = []
        self._stop = None
        self._thread = None
        self._work = None
        self._torch = None
        self._growth = None

    # The block.

    def __enter__(self):
        self._reset()
        self.cli = _shim.find_cli(self._cli)
        self.shim = _shim.get(self.cli)
        self.shim.refresh()
        self._work = tempfile.mkdtemp(prefix="cudaleak-track-")
        # The pools emptied at both ends, so that the start is counted as the end is: cuBLAS's
        # workspaces, which the end gives back, would otherwise be counted at the start only.
        _frameworks.empty_pools()
        # PyTorch's own record first: what the block allocates is then named at its line.
        self._torch = _frameworks.TorchWindow.start()
        self.mark = self.shim.mark()
        self.started = time.time()
        if self.snapshot_every:
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._snapshots_loop, name="cudaleak-track-snapshots", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self.shim.attached:
                # Ours alone (the shim this package attached writes into a directory of its
                # own): they go with the block, not into the session's directory for good.
                self._snapshots = [_move(p, self._work) for p in self._snapshots]
        self.ended = time.time()
        gc.collect()
        _frameworks.empty_pools()
        records = self._torch.records(self.shim, self.mark) if self._torch else None
        self.dump_path = os.path.join(self._work, f"cudaleak.{os.getpid()}.json")
        self.shim.dump(self.dump_path, records)
        if exc_type is None and self.limit is not None:
            self.assert_no_leaks(self.limit)
        return False

    def _snapshots_loop(self):
        while not self._stop.wait(self.snapshot_every):
            path = self.shim.snapshot()
            if path is not None:
                self._snapshots.append(path)

    # What it left.

    def _ended(self):
        if self.dump_path is None:
            raise CudaleakError("cudaleak: the tracked block has not ended yet")

    @property
    def leaks(self):
        """The leak groups: blocks allocated inside the block and still live at its end,
        largest first (framework caches and library handles are not leaks: see `report()`)."""
        return [Leak(g) for g in self._json().get("leaks", [])]

    @property
    def leaked_bytes(self):
        return self._json().get("summary", {}).get("leaked_bytes", 0)

    @property
    def growth(self):
        """The growth verdict (`Growth`), when at least two snapshots were taken while the block
        ran (one every `snapshot_every` seconds); else None."""
        self._ended()
        if self._growth is None and len(self._snapshots) >= 2:
            series = self._series()
            _, out = _shim.run_cli(
                self.cli, self._growth_args(series, "json"), ok=(0, GATE_FAILED)
            )
            self._growth = Growth(json.loads(out), len(self._snapshots) + 1, self)
        return self._growth

    def report(self, format="text", **options):
        """The CLI's report of what the block left, in FORMAT (text, json, markdown, html,
        sarif, folded). OPTIONS are `cudaleak report` options, e.g. `min_bytes="1 MiB"`,
        `show_cached=True`, `frames=8`."""
        return self._render(format, **options)

    def assert_no_leaks(self, limit="0 B"):
        """Raises LeakError, with the CLI's text report, when the block left more than LIMIT
        (bytes, or a size such as "1 MiB") allocated: the CLI's gate with --max-leaked-bytes."""
        self._ended()
        args = self._report_args("text", max_leaked_bytes=str(limit))
        status, out = _shim.run_cli(self.cli, args, ok=(0, GATE_FAILED))
        if status == GATE_FAILED:
            raise LeakError(out, self.leaked_bytes, self)

    def _json(self):
        self._ended()
        if self._doc is None:
            _, out = _shim.run_cli(self.cli, self._report_args("json"), ok=(0, GATE_FAILED))
            self._doc = json.loads(out)
        return self._doc

    def _render(self, format, growth=False, **options):
        self._ended()
        if format not in FORMATS:
            raise ValueError(f"cudaleak: format must be one of {', '.join(FORMATS)}")
        if growth:
            if len(self._snapshots) < 2:
                raise CudaleakError(
                    "cudaleak: the block took fewer than two snapshots "
                    f"(one every {self.snapshot_every} s): no growth to judge"
                )
            args = self._growth_args(self._series(), format, **options)
        else:
            args = self._report_args(format, **options)
        _, out = _shim.run_cli(self.cli, args, ok=(0, GATE_FAILED))
        return out

    def _report_args(self, format, **options):
        args = ["report", "--format", format, "--color", "never", "--since", str(self.mark)]
        args += ["--pools-emptied", "--fail-on", self.fail_on]
        return args + _options(options) + [self.dump_path]

    def _growth_args(self, series, format, **options):
        args = ["report", "--growth", "--format", format, "--color", "never"]
        args += ["--since", str(self.mark)]
        return args + _options(options) + [series]

    def _series(self):
        """A directory holding the block's snapshots, then its end dump: the series `report
        --growth` judges."""
        series = os.path.join(self._work, "series")
        if not os.path.isdir(series):
            os.mkdir(series)
            for path in self._snapshots:
                _link(path, os.path.join(series, os.path.basename(path)))
            _link(self.dump_path, os.path.join(series, os.path.basename(self.dump_path)))
        return series

    def close(self):
        """Removes the block's dumps (also done when the Tracker is collected)."""
        if self._work:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self):
        if self.dump_path is None:
            return "Tracker(running)" if self.mark is not None else "Tracker(not started)"
        return f"Tracker(leaks={len(self.leaks)}, leaked_bytes={self.leaked_bytes})"


def _options(options):
    out = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value not in (None, False):
            out += [flag, str(value)]
    return out


def _move(path, folder):
    dst = os.path.join(folder, os.path.basename(path))
    try:
        os.replace(path, dst)
    except OSError:
        return path
    return dst


def _link(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def track(limit=None, *, snapshot_every=5.0, cli=None, fail_on="all"):
    """Tracks what a block leaves allocated on the GPU: a context manager, or a decorator.

    Blocks allocated before the block began are never blamed on it. At its end the frameworks'
    pools are emptied (so what PyTorch or CuPy still holds is what objects keep), a dump is
    written and the CLI judges it, as `cudaleak report --since` does.

    limit: when given (bytes, or a size such as "1 MiB"), the block raises LeakError at its end
        if it left more than this; as a decorator, every call is checked.
    snapshot_every: seconds between the snapshots taken while the block runs, for `growth`
        (None: none).
    cli: the `cudaleak` command (default: $CUDALEAK_CLI, the one installed with this package,
        then PATH).
    fail_on: what `assert_no_leaks` and `limit` count (`cudaleak report --fail-on`): leaks,
        errors, all, or strict (what caches hold counts too).
    """
    return Tracker(limit=limit, snapshot_every=snapshot_every, cli=cli, fail_on=fail_on)


class Snapshot:
    """A dump of everything live at one moment (`cudaleak.snapshot()`), for `cudaleak.diff`
    or `cudaleak report PATH`."""

    def __init__(self, path, mark, cli):
        #: The dump file (kept until the interpreter exits).
        self.path = path
        #: The shim's sequence number when it was taken.
        self.mark = mark
        self.cli = cli

    def report(self, format="text", **options):
        """The CLI's report of this dump (everything live when it was taken)."""
        args = ["report", "--format", format, "--color", "never", *_options(options), self.path]
        return _shim.run_cli(self.cli, args, ok=(0, GATE_FAILED))[1]

    def __repr__(self):
        return f"Snapshot({self.path!r})"


class Diff:
    """What changed between two snapshots (`cudaleak diff OLD NEW`): `callsites` as its JSON
    lists them (`trend`, `delta_bytes`, frames …), `report()` its text."""

    def __init__(self, old, new):
        self.old, self.new = old, new
        _, out = _shim.run_cli(new.cli, ["diff", "--format", "json", old.path, new.path])
        self.doc = json.loads(out)

    @property
    def callsites(self):
        return self.doc.get("callsites", [])

    @property
    def delta_bytes(self):
        return self.doc.get("delta_bytes", 0)

    def report(self, format="text", **options):
        args = ["diff", "--format", format, "--color", "never", *_options(options)]
        return _shim.run_cli(self.new.cli, [*args, self.old.path, self.new.path])[1]

    def __repr__(self):
        return f"Diff(delta_bytes={self.delta_bytes}, callsites={len(self.callsites)})"


_snapshots_dir = None


def snapshot(cli=None):
    """A dump of everything live now (the shim is loaded into this process if it is not there;
    what was allocated before it was loaded is unknown to it)."""
    global _snapshots_dir
    cli = _shim.find_cli(cli)
    shim = _shim.get(cli)
    if _snapshots_dir is None:
        _snapshots_dir = tempfile.mkdtemp(prefix="cudaleak-snapshots-")
        import atexit

        atexit.register(shutil.rmtree, _snapshots_dir, True)
    mark = shim.mark()
    path = os.path.join(_snapshots_dir, f"cudaleak.{os.getpid()}.{mark}.{time.time_ns()}.json")
    shim.dump(path)
    return Snapshot(path, mark, cli)


def diff(old, new):
    """What changed between two snapshots, by callsite."""
    return Diff(old, new)
