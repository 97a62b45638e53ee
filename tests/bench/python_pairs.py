"""python_pairs.py PAIRS DEPTH [watch]: DEPTH Python frames deep, makes PAIRS cuMemAlloc_v2 +
cuMemFree_v2 pairs through ctypes (the GIL released, as ctypes.CDLL does) on the benchmark
driver, and prints the loop's wall time per pair. Not a test: src/bin/bench.rs runs it bare, under
the shim with CUDALEAK_PY_DEPTH=0 and under the shim with Python frames, and compares. With
`watch`, the bootstrap's code watcher is added first, as `cudaleak run` does once a framework is
imported (CPython 3.12+; python/cudaleak/_bootstrap.py)."""
import ctypes
import importlib.util
import os
import sys
import time

pairs, depth = int(sys.argv[1]), int(sys.argv[2])
if sys.argv[3:] == ["watch"]:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "python", "cudaleak", "_bootstrap.py")
    spec = importlib.util.spec_from_file_location("_cudaleak_bootstrap", path)
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)
    print(f"code watcher {boot.watch_code()}", file=sys.stderr)
cuda = ctypes.CDLL("libcuda.so.1")
alloc, free = cuda.cuMemAlloc_v2, cuda.cuMemFree_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
free.argtypes = [ctypes.c_ulonglong]


def loop():
    p = ctypes.c_ulonglong()
    ref = ctypes.byref(p)
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        if alloc(ref, 4096) != 0 or free(p.value) != 0:
            sys.exit(99)
    return time.perf_counter_ns() - t0


def deep(d):
    # The module's frame and loop()'s count: DEPTH frames in all at the allocation.
    return loop() if d <= 2 else deep(d - 1)


elapsed = deep(depth)
print(f"ns_per_pair {elapsed / pairs:.2f}")
