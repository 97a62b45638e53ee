"""What the frameworks of a Python process say they hold, handed to the cudaleak shim.

`cudaleak run` writes this file as `_cudaleak_bootstrap.py` beside a `sitecustomize.py`
(python/cudaleak/_sitecustomize.py) into a folder it puts first on PYTHONPATH; that `sitecustomize`
calls `start()`. Once the program imports PyTorch, JAX or CuPy, a daemon thread ("cudaleak-fw")
reads, every CUDALEAK_FRAMEWORK_INTERVAL_MS (50) milliseconds, what they say they hold and hands
each read to the shim (`cudaleak_framework_counters`): a tensor kept inside PyTorch's caching
allocator never reaches the driver, but it shows in PyTorch's own count. When PyTorch's count keeps
rising (the least bytes of each CUDALEAK_FRAMEWORK_WINDOW_MS (1000) ms window above the one before,
four windows in a row), its own allocation record is turned on, and at the script's end the live
blocks it names are grouped by the Python lines that made them and handed over with
`cudaleak_framework_end`.

A guest in someone else's program. It must never import a framework (only `sys.modules` is
looked at), never touch a framework before the program has initialised CUDA through it, never
synchronise a stream or create a context, never print (but with CUDALEAK_DEBUG set) and never let
an exception out. Standard library only, Python 3.8 and later: the CLI embeds this file whole.
CUDALEAK_FRAMEWORKS=0 turns it off.
"""

import _thread
import atexit
import errno
import os
import sys
import time

# A number the shim reads as unknown.
_UNKNOWN = (1 << 64) - 1
# Window floors in a row, each above the one before, before PyTorch's record is turned on.
_RISES = 4
# What the record hands over: groups, largest first, and frames per group, innermost first.
_MAX_GROUPS = 20
_MAX_FRAMES = 64
# The modules whose import starts the reader.
_FRAMEWORKS = ("torch", "jax", "cupy")
# How long the exit handler waits for a read in flight before it reads anyway.
_JOIN_S = 2.0

_sampler = None
# Whether the shim's code watcher was added (`watch_code`): None before it was tried.
_code_watched = None

# The variables (CUDALEAK_DEBUG, CUDALEAK_FRAMEWORKS, CUDALEAK_FRAMEWORK_*_MS), the shim's file
# name and its functions (cudaleak_framework_counters, cudaleak_framework_end, cudaleak_mark,
# cudaleak_code_event, cudaleak_code_watched) are spelled here, not asked of the CLI as the rest
# of the package does (cudaleak/_names.py): this runs inside the program under test, which must
# not start a process for it. python/tests/test_names.py holds these spellings to `cudaleak env
# --names`.


def _debug(what):
    if os.environ.get("CUDALEAK_DEBUG", "") not in ("", "0"):
        try:
            sys.stderr.write("cudaleak bootstrap: %s\n" % what)
        except Exception:
            pass


def _env_ms(name, default):
    try:
        v = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return v if v > 0 else default


def _unix_ms():
    return int(time.time() * 1000)


def _text(s):
    """`s` as text the shim's JSON reader takes (a file name may hold undecodable bytes)."""
    if s is None:
        return None
    s = str(s)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _count(v):
    """A framework's number as the shim takes it: a non-negative int, else unknown."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return _UNKNOWN
    return v if 0 <= v < _UNKNOWN else _UNKNOWN


def watch_code():
    """On CPython 3.12+, adds the shim's code watcher (`cudaleak_code_event`) to this interpreter
    and names the interpreter to the shim (`cudaleak_code_watched`): the shim's walk of a
    thread's Python frames then reads a code object again only after one was freed
    (docs/python.md, "The code watcher"). Tried once a process; True when the watcher is on.
    Nothing (False) without the shim's functions, on another interpreter or an older version."""
    global _code_watched
    if _code_watched is not None:
        return _code_watched
    _code_watched = False
    if sys.implementation.name != "cpython" or sys.version_info < (3, 12):
        return False
    try:
        import ctypes as c

        lib = c.CDLL(None)
        event, watched = lib.cudaleak_code_event, lib.cudaleak_code_watched
        # A handle of our own: the program's `ctypes.pythonapi` keeps its own argtypes.
        api = c.PyDLL(None)
        add, interp = api.PyCode_AddWatcher, api.PyInterpreterState_Get
        add.argtypes, add.restype = [c.c_void_p], c.c_int
        interp.argtypes, interp.restype = [], c.c_void_p
        watched.argtypes, watched.restype = [c.c_void_p], c.c_int
        # PyDLL raises what the interpreter sets (all its watcher slots taken).
        if add(c.cast(event, c.c_void_p).value) < 0:
            return False
        _code_watched = watched(interp()) == 0
    except Exception as e:
        _debug("no code watcher: %s: %s" % (type(e).__name__, e))
    return _code_watched


class _Shim:
    """The shim's exported functions, or `None` from `find()` when they are not there."""

    @staticmethod
    def find():
        import ctypes

        try:
            lib = ctypes.CDLL(None, use_errno=True)
            counters = lib.cudaleak_framework_counters
            end = lib.cudaleak_framework_end
            mark = lib.cudaleak_mark
        except (OSError, AttributeError):
            return None
        counters.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_int,
        ]
        counters.restype = ctypes.c_int
        end.argtypes = [ctypes.c_char_p]
        end.restype = ctypes.c_int
        mark.argtypes = []
        mark.restype = ctypes.c_uint64
        shim = _Shim()
        shim._ctypes, shim._counters, shim._end, shim._mark = ctypes, counters, end, mark
        shim._prctl = getattr(lib, "prctl", None)
        return shim

    def name_thread(self, name):
        """Names the calling thread for `top -H`, gdb and py-spy (Linux: at most 15 bytes)."""
        if self._prctl is not None:
            self._prctl(15, self._ctypes.c_char_p(name[:15]), 0, 0, 0)  # PR_SET_NAME

    def counters(self, framework, backend, device, values):
        """0, or the errno of a refused read."""
        c = self._ctypes
        v = (c.c_uint64 * 4)(*values)
        if self._counters(framework, backend, device, v, 4) == 0:
            return 0
        return c.get_errno()

    def end(self, records):
        if self._end(records) == 0:
            return 0
        return self._ctypes.get_errno()

    def mark(self):
        return self._mark()


class _Sampler:
    def __init__(self):
        self.shim = None
        self.interval = _env_ms("CUDALEAK_FRAMEWORK_INTERVAL_MS", 50) / 1000.0
        self.window = _env_ms("CUDALEAK_FRAMEWORK_WINDOW_MS", 1000) / 1000.0
        self.reset()

    def reset(self):
        """The state of a fresh process (also a forked child's: its counts are its own)."""
        self.lock = _thread.allocate_lock()  # one read at a time: the reader's or the exit's
        self.starting = _thread.allocate_lock()  # taken once, by whoever starts the reader
        self.stop = _thread.allocate_lock()  # held while the reader should run
        self.stop.acquire()
        self.done = None  # held by the reader until it returns
        self.ended = False
        self.off = False  # no shim, or the shim refused every read (ENOTSUP)
        self.broken = set()  # frameworks whose read raised
        self.refused = set()  # (framework, backend, device) the shim refused
        self.seen = set()  # (framework, backend, device) read non-zero at least once
        self.handed = False  # a read reached the shim
        self.torch = None  # (backend, device count, the nested-stats call or None)
        self.window_start = None
        self.window_floor = None
        self.floors = []
        self.record_since = None  # when PyTorch's record was turned on (or tried)
        self.record_note = None

    # The reader.

    def begin(self):
        """Finds the shim and starts the reader, once; nothing when the shim is not here."""
        if not self.starting.acquire(False):
            return
        if self.shim is None:
            self.shim = _Shim.find()
        if self.shim is None:
            self.off = True
            return
        watch_code()
        done = _thread.allocate_lock()
        done.acquire()
        self.done = done
        # A thread of `_thread`, not `threading`: the program's threading.enumerate() and
        # active_count() stay its own, and `threading` is not imported for it.
        _thread.start_new_thread(self.run, (done,))

    def run(self, done):
        try:
            self.shim.name_thread(b"cudaleak-fw")
            while not self.stop.acquire(True, self.interval):
                with self.lock:
                    if self.ended or self.off:
                        return
                    self.read(grow=True)
        except Exception as e:
            _debug("the reader stopped: %s: %s" % (type(e).__name__, e))
        finally:
            done.release()

    # One read of every framework.

    def read(self, grow):
        readers = (("torch", self.read_torch), ("jax", self.read_jax), ("cupy", self.read_cupy))
        for name, read in readers:
            if name in self.broken or self.off:
                continue
            try:
                read(grow)
            except Exception as e:
                # Not read again: a framework that fails once fails the same way every 50 ms.
                self.broken.add(name)
                _debug("%s: %s: %s; not read again" % (name, type(e).__name__, e))

    def hand(self, framework, backend, device, values):
        key = (framework, backend, device)
        if key in self.refused:
            return
        values = [_count(v) for v in values]
        if values[0] == _UNKNOWN:
            return
        if key not in self.seen:
            # A device whose counts have always been zero is one the program does not use.
            if not any(v not in (0, _UNKNOWN) for v in values):
                return
            self.seen.add(key)
        e = self.shim.counters(
            framework.encode(), backend.encode() if backend else None, device, values
        )
        if e == 0:
            self.handed = True
            return
        if e == errno.ENOTSUP:
            self.off = True  # another copy of the shim records this process
        else:
            self.refused.add(key)
        _debug("%s %s device %d: the shim refused the read (errno %d)" % (key + (e,)))

    def read_torch(self, grow):
        torch = _imported("torch")
        cuda = _imported("torch.cuda") if torch is not None else None
        # Only once the program has initialised CUDA through PyTorch (this never does).
        if cuda is None or not cuda.is_initialized():
            return
        if self.torch is None:
            c = getattr(torch, "_C", None)
            nested = getattr(c, "_cuda_memoryStats", None) if c is not None else None
            backend = getattr(cuda, "get_allocator_backend", None)  # PyTorch 2.0 and later
            backend = str(backend()) if backend is not None else "native"
            self.torch = (backend, int(cuda.device_count()), nested)
        backend, devices, nested = self.torch
        total = 0
        for d in range(devices):
            if nested is not None:
                # The allocator's own dict, without memory_stats()'s flattening into ~100 keys.
                s = nested(d)
                values = [
                    s.get(k, {}).get("all", {}).get("current", _UNKNOWN)
                    for k in ("allocated_bytes", "allocation", "active_bytes", "reserved_bytes")
                ]
            else:
                s = cuda.memory_stats(d)
                values = [
                    s.get(k + ".all.current", _UNKNOWN)
                    for k in ("allocated_bytes", "allocation", "active_bytes", "reserved_bytes")
                ]
            self.hand("torch", backend, d, values)
            if values[0] != _UNKNOWN:
                total += int(values[0])
        if grow and backend == "native":
            self.watch_growth(torch, total)

    def watch_growth(self, torch, total):
        """The least of PyTorch's allocated bytes per window; four rises in a row turn its record
        on for the rest of the run."""
        if self.record_since is not None:
            return
        now = time.monotonic()
        if self.window_start is None:
            self.window_start, self.window_floor = now, total
            return
        if now - self.window_start < self.window:
            self.window_floor = min(self.window_floor, total)
            return
        self.floors = (self.floors + [self.window_floor])[-(_RISES + 1):]
        self.window_start, self.window_floor = now, total
        f = self.floors
        if len(f) == _RISES + 1 and all(b > a for a, b in zip(f, f[1:])):
            self.record_since = _unix_ms()
            try:
                torch.cuda.memory._record_memory_history(
                    enabled="state", context="alloc", stacks="python"
                )
                _debug("torch: growth seen (%s); its record is on" % f)
            except Exception as e:
                self.record_note = "PyTorch's record could not be turned on: %s: %s" % (
                    type(e).__name__,
                    e,
                )
                _debug(self.record_note)

    def read_jax(self, grow):
        if _imported("jax") is None:
            return
        # Private: the backends JAX has created. Only one the program created is read.
        xb = _imported("jax._src.xla_bridge")
        backends = getattr(xb, "_backends", None) if xb is not None else None
        if not isinstance(backends, dict):
            return
        gpu = None
        for name in ("cuda", "gpu"):
            gpu = backends.get(name)
            if gpu is not None:
                break
        if gpu is None:
            return
        platform = os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR") == "platform"
        allocator = "platform" if platform else "bfc"
        for device in gpu.local_devices():
            stats = device.memory_stats()
            if not stats:
                continue
            self.hand(
                "jax",
                allocator,
                int(device.id),
                [
                    stats.get("bytes_in_use", _UNKNOWN),
                    _UNKNOWN,
                    _UNKNOWN,
                    stats.get("bytes_limit", _UNKNOWN),
                ],
            )

    def read_cupy(self, grow):
        cupy = _imported("cupy")
        # Only once the shim has seen an allocation: before that the pool holds nothing, and a
        # call could be the process's first into the runtime.
        if cupy is None or self.shim.mark() == 0:
            return
        pool = cupy.get_default_memory_pool()
        device = int(cupy.cuda.runtime.getDevice())
        values = [pool.used_bytes(), _UNKNOWN, _UNKNOWN, pool.total_bytes()]
        self.hand("cupy", "pool", device, values)

    # The end.

    def torch_record(self):
        record = {
            "framework": "torch",
            "since_unix_ms": self.record_since,
            "unix_ms": _unix_ms(),
            "groups": [],
            "note": self.record_note,
        }
        if self.record_note is None:
            try:
                snapshot = sys.modules["torch"].cuda.memory._snapshot()
                record["unix_ms"] = _unix_ms()
                record["groups"] = _groups(snapshot)
            except Exception as e:
                record["note"] = "PyTorch's record could not be read: %s: %s" % (
                    type(e).__name__,
                    e,
                )
        return record

    def at_exit(self):
        """After the program's own exit handlers: the last read, then the record."""
        try:
            self.finish()
        except Exception as e:
            _debug("at exit: %s: %s" % (type(e).__name__, e))

    def finish(self):
        if self.done is None:
            return  # no framework was imported, or no shim: nothing was read
        if self.stop.locked():
            self.stop.release()
        self.done.acquire(True, _JOIN_S)
        # A read that hangs in a framework must not hang the program's exit.
        if not self.lock.acquire(True, _JOIN_S):
            _debug("a read did not return; no last read")
            return
        try:
            self.end()
        finally:
            self.lock.release()

    def end(self):
        if self.ended or self.off:
            return
        self.ended = True
        self.read(grow=False)
        if self.record_since is None and not self.handed:
            return  # nothing was read: the dumps carry no frameworks at all
        # The counts end here, at the script's end: reading PyTorch's record below can take
        # seconds, and snapshots taken meanwhile must not read as the script's own.
        e = self.shim.end(None)
        if e != 0:
            _debug("the shim refused the end (errno %d)" % e)
        if self.record_since is None:
            return
        import json

        e = self.shim.end(json.dumps([self.torch_record()]).encode("utf-8"))
        if e != 0:
            _debug("the shim refused the record (errno %d)" % e)

    def after_fork_in_child(self):
        try:
            running = self.done is not None
            self.reset()  # new locks: the parent's reader may have held one at the fork
            if running:
                self.begin()
        except Exception as e:
            _debug("after fork: %s: %s" % (type(e).__name__, e))


class _Watch:
    """A finder first on `sys.meta_path` that finds nothing: it only starts the reader when the
    program first imports a framework, so a Python that never does gets no thread (none to
    wake 20 times a second, none for Python 3.12's warning about forking a threaded process)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def find_spec(self, name, path=None, target=None):
        if path is None and name in _FRAMEWORKS and not self.sampler.starting.locked():
            try:
                self.sampler.begin()
            except Exception as e:
                _debug("the reader did not start: %s: %s" % (type(e).__name__, e))
        return None


def _imported(name):
    """The module `name` once the program has imported it whole; `None` before, or while its
    import runs (a half-made module would fail the read, and a failed read is never retried)."""
    m = sys.modules.get(name)
    if m is None or getattr(getattr(m, "__spec__", None), "_initializing", False):
        return None
    return m


def _frames(raw):
    """PyTorch's frames (`filename`, `line`, `name`) as the dump's Python frames, innermost
    first, at most _MAX_FRAMES."""
    frames = []
    for f in raw:
        if not isinstance(f, dict):
            continue
        file = f.get("filename")
        if not file or file == "??":
            continue
        line = f.get("line")
        frames.append(
            {
                "kind": "python",
                "ip": "0x0",
                "module": None,
                "offset": None,
                "function": _text(f.get("name")),
                "file": _text(file),
                "line": line if isinstance(line, int) and 0 <= line < (1 << 32) else None,
            }
        )

    def outermost(fr):
        name, file = fr["function"] or "", fr["file"] or ""
        return name == "<module>" or (name.endswith("_bootstrap") and file.endswith("threading.py"))

    # PyTorch lists the innermost frame first; should one ever list the interpreter's entry
    # first, turn it round.
    if len(frames) > 1 and outermost(frames[0]) and not outermost(frames[-1]):
        frames.reverse()
    return frames[:_MAX_FRAMES]


def _groups(snapshot, skip=None):
    """The live blocks of PyTorch's snapshot that carry frames, grouped by device and frames,
    largest first; without those `skip(segment, block)` is true of (the Python API's window:
    cudaleak/_frameworks.py)."""
    groups = {}
    for segment in snapshot.get("segments", ()):
        device = segment.get("device")
        for block in segment.get("blocks", ()):
            if block.get("state") != "active_allocated":
                continue
            if skip is not None and skip(segment, block):
                continue
            raw = block.get("frames")
            if not raw and block.get("history"):
                raw = block["history"][-1].get("frames")  # PyTorch 2.0
            frames = _frames(raw or ())
            if not frames:
                continue  # made before the record was on
            key = (device, tuple((f["file"], f["line"], f["function"]) for f in frames))
            g = groups.get(key)
            if g is None:
                g = groups[key] = {
                    "blocks": 0,
                    "bytes": 0,
                    "device": device if isinstance(device, int) else None,
                    "frames": frames,
                }
            g["blocks"] += 1
            g["bytes"] += int(block.get("size", 0))
    ordered = sorted(groups.values(), key=lambda g: (-g["bytes"], -g["blocks"]))
    return ordered[:_MAX_GROUPS]


def start():
    """Adds the shim's code watcher (CPython 3.12+, the shim preloaded) and readies the reader:
    it starts when the program first imports a framework (at once if one is imported already),
    and not at all when the shim's functions are not in the process. Nothing with
    CUDALEAK_FRAMEWORKS=0; a second call does nothing."""
    global _sampler
    if _sampler is not None or os.environ.get("CUDALEAK_FRAMEWORKS") == "0":
        return
    # Now rather than with the first framework: a program that reaches CUDA through ctypes,
    # cuda-python or numba frees code objects too. `ctypes` costs about 3 ms to import; not
    # imported where the shim is not preloaded (nor before 3.12: `watch_code`).
    if "libcudaleak" in os.environ.get("LD_PRELOAD", ""):
        watch_code()
    s = _Sampler()
    _sampler = s
    # Registered now, before the program's own: exit handlers run last-registered first, so
    # this one reads what the script still holds after its handlers have run.
    atexit.register(s.at_exit)
    os.register_at_fork(after_in_child=s.after_fork_in_child)
    if any(name in sys.modules for name in _FRAMEWORKS):
        s.begin()  # a .pth file imported one already
    else:
        sys.meta_path.insert(0, _Watch(s))
