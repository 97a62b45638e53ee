"""Allocates from code objects made and freed one after another, so that each new one may take
the freed one's address (and its file name and line table theirs); tests/tests/python.rs runs it
under the shim and checks that every leaked block names the file and line of the code object that
made it, not of the one before it at that address.

usage: code_reuse.py NULLCUDA_DIR COUNT [watch|simulate|late]
  watch: first add the shim's code watcher (CPython 3.12+), as `cudaleak run`'s bootstrap does
  at start-up (python/cudaleak/_bootstrap.py); it prints "code watcher BOOL".
  simulate: for an interpreter without code watchers (before 3.12), tell the shim what the
  watcher would: this interpreter is watched (cudaleak_code_watched), and each code object is
  freed (cudaleak_code_event) before the next is made.
  late: `replaced` alone, the watcher added (3.12+) or simulated only after its first LATE (6)
  blocks (of 3000 + 2k bytes), once their code objects are freed unwatched: the registry must
  forget what it met before.

Leaks block i (1000 + i bytes) from line i + 2 of a file named gen_IIII.py (i even) or gen.py (i
odd), through the same three frames each time (this module, `run`, `call`). Then leaks COUNT blocks
of 2000 + 2k bytes from line k + 2 of replaced.py, for a few k (`replaced`).
"""
import ctypes
import gc
import importlib.util
import os
import sys
import types

runtime_dir, count = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else None
freed = None


def watcher():
    """A function that adds the watcher, or (before 3.12) tells the shim what it would and sets
    `freed`: everything it needs made now, so that calling it later allocates next to nothing
    (the freed code object's blocks stay for the next one)."""
    if sys.version_info >= (3, 12):
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "..", "..", "python", "cudaleak", "_bootstrap.py")
        spec = importlib.util.spec_from_file_location("_cudaleak_bootstrap", path)
        boot = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(boot)
        return boot.watch_code
    shim = ctypes.CDLL(None)
    event, watched = shim.cudaleak_code_event, shim.cudaleak_code_watched
    event.argtypes, watched.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]
    interp = ctypes.pythonapi.PyInterpreterState_Get
    interp.restype = ctypes.c_void_p
    here = interp()

    def simulated(code_address):
        event(1, code_address)  # PY_CODE_EVENT_DESTROY

    def name():
        global freed
        freed = simulated
        return watched(here) == 0

    return name


watch = watcher() if mode else None
# `late`: the blocks made before the watcher (the first code object is made elsewhere, the
# following ones where it was freed).
LATE = 6
if mode == "watch":
    assert sys.version_info >= (3, 12)
    print(f"code watcher {watch()}", flush=True)
elif mode == "simulate":
    assert sys.version_info < (3, 12)
    assert watch()

rt = ctypes.CDLL(runtime_dir + "/libcudart.so.13")


def cuda_malloc(size):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p


def call(f, size):
    return f(size)


def run():
    # Every other code object under one file name object, its line alone telling it apart (the
    # code object's key, its address and those of its names and line table, can all read the
    # same); the others each under a file name of their own.
    shared = "gen.py"
    for i in range(count):
        source = "def f(size):\n" + "\n" * i + "    return cuda_malloc(size)\n"
        scope = {"cuda_malloc": cuda_malloc}
        exec(compile(source, shared if i % 2 else "gen_%04d.py" % i, "exec"), scope)
        call(scope["f"], 1000 + i)
        code = id(scope["f"].__code__)
        del scope
        gc.collect()
        if freed is not None:
            freed(code)


def replaced():
    """The same code object made again and again with another line table of the same length: the
    line table is made just before the code object, in the block the last one's was freed from,
    so the new code object's key (its address, file name, name and line table objects, first line)
    reads as the freed one's while its lines differ."""
    attr = "co_linetable" if sys.version_info >= (3, 10) else "co_lnotab"
    tables = {}
    for k in range(40):
        source = "def f(size):\n" + "\n" * k + "    return cuda_malloc(size)\n"
        scope = {}
        exec(compile(source, "replaced.py", "exec"), scope)
        t = getattr(scope["f"].__code__, attr)
        tables.setdefault(len(t), []).append((k, t))
    lines = max(tables.values(), key=len)
    template = compile("def f(size):\n    return cuda_malloc(size)\n", "replaced.py", "exec")
    template = [c for c in template.co_consts if isinstance(c, types.CodeType)][0]
    scope = {"cuda_malloc": cuda_malloc}
    for j in range(count):
        k, table = lines[j % len(lines)]
        code = template.replace(**{attr: bytes(memoryview(table))})
        f = types.FunctionType(code, scope)
        # Before the late watcher: 3000 + 2k, which may be named by another code object's line.
        unwatched = mode == "late" and j < LATE
        call(f, (3000 if unwatched else 2000) + 2 * k)
        address = id(code)
        del f, code
        gc.collect()
        if freed is not None:
            freed(address)
        if mode == "late" and j == LATE - 1:
            assert watch()


if mode != "late":
    run()
replaced()
