"""Daemon threads inside hooked CUDA calls while the main thread exits: Py_FinalizeEx deletes
their thread states while the threads are in the shim's hooks (PyTorch's pin-memory thread in
cudaHostAlloc, at the end of a training script). Two threads each run pin_memory_loop (native code, the GIL
released, never returning: frameworks/pin_memory.c) from 30 Python frames down.
tests/tests/python.rs runs it many times under the shim: every run must end with this
program's own status, 7.

usage: finalize.py FRAMEWORKS_DIR
"""
import ctypes
import sys
import threading
import time

pin = ctypes.CDLL(sys.argv[1] + "/libpin_memory.so")
pairs = [ctypes.c_long(0) for _ in range(2)]


def deep(depth, i):
    if depth:
        return deep(depth - 1, i)
    pin.pin_memory_loop(None, ctypes.byref(pairs[i]))


for i in range(len(pairs)):
    threading.Thread(target=deep, args=(30, i), daemon=True).start()
while min(p.value for p in pairs) < 10:  # every thread is inside its loop
    time.sleep(0.001)
sys.exit(7)
