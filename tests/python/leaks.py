"""Leaks device memory through ctypes from named Python functions; tests/tests/python.rs runs it
under the shim with each CPython it finds and checks the dump and the report name each function
and `# @marker` line.

usage: leaks.py NULLCUDA_DIR cdll|pydll
  cdll: ctypes.CDLL, which releases the GIL around the call; pydll: ctypes.PyDLL, which keeps it.

Expected live blocks: 1000 B from Model.forward via train_step; 5 x 2000 B from one line of
leak_in_loop; 3000 B from path_a and 3000 B from path_b (one native stack, two Python paths);
4000 B from a thread's worker; 5000 B from größe (a non-ASCII name); 6000 B from an atexit
handler; 7000 B from a __del__ that runs while the interpreter finalizes (Python frames optional:
the interpreter may already say it is not initialised).
"""
import atexit
import ctypes
import sys
import threading

runtime_dir, mode = sys.argv[1], sys.argv[2]
load = {"cdll": ctypes.CDLL, "pydll": ctypes.PyDLL}[mode]
rt = load(runtime_dir + "/libcudart.so.13")


def cuda_malloc(size):
    p = ctypes.c_void_p()
    status = rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))  # @alloc
    assert status == 0, status
    return p


class Model:
    def forward(self, size):
        return cuda_malloc(size)  # @forward


def train_step(model):
    return model.forward(1000)  # @train_step


def leak_in_loop():
    kept = []
    for _ in range(5):
        kept.append(cuda_malloc(2000))  # @loop
    return kept


def path_a():
    return cuda_malloc(3000)  # @path_a


def path_b():
    return cuda_malloc(3000)  # @path_b


def worker(out):
    out.append(cuda_malloc(4000))  # @worker


def größe():
    return cuda_malloc(5000)  # @unicode


def at_exit():
    KEPT.append(cuda_malloc(6000))  # @atexit


class Finalizer:
    """Allocates when destroyed at interpreter shutdown, with what it needs kept on itself (the
    module's globals may be gone by then)."""

    def __init__(self):
        self.malloc, self.byref, self.p = rt.cudaMalloc, ctypes.byref, ctypes.c_void_p()

    def __del__(self):
        self.malloc(self.byref(self.p), ctypes.c_size_t(7000))


def main():
    kept = [train_step(Model()), leak_in_loop(), path_a(), path_b(), größe()]  # @main
    t = threading.Thread(target=worker, args=(kept,))
    t.start()
    t.join()
    return kept


KEPT = main()  # @module
atexit.register(at_exit)
FINAL = Finalizer()
print("done")
