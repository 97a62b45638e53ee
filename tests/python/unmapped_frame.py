"""A thread inside hooked CUDA calls whose thread state points the walk into unmapped memory, as
the state of a thread that Py_FinalizeEx freed under it may: the shim's reads must fail and the
thread's allocations get native stacks, never a fault. tests/tests/python.rs runs it under the
shim with each CPython it finds.

usage: unmapped_frame.py FRAMEWORKS_DIR OFFSET
  OFFSET: where this version's PyThreadState keeps the first pointer the walk follows
  (tstate->frame in 3.9 and 3.10, ->cframe in 3.11 and 3.12, ->current_frame from 3.13).

The worker runs pin_memory_loop (native code, the GIL released: frameworks/pin_memory.c), which
allocates and frees pinned buffers until told to stop. The main thread points the worker's
pointer at a PROT_NONE page for 0.2 s, puts it back, lets the loop run on, then stops it.
Prints "done N", N the pairs made while the pointer was bad. Expected live: one 8192 B block,
allocated by the loop after it was told to stop, with worker's Python frames.
"""
import ctypes
import sys
import threading
import time

frameworks, offset = sys.argv[1], int(sys.argv[2])
pin = ctypes.CDLL(frameworks + "/libpin_memory.so")
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
PROT_NONE, MAP_PRIVATE, MAP_ANONYMOUS = 0, 0x02, 0x20
unmapped = libc.mmap(None, 1 << 16, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
assert unmapped not in (None, ctypes.c_void_p(-1).value)
this_thread_state = ctypes.pythonapi.PyThreadState_Get
this_thread_state.restype = ctypes.c_void_p

stop, pairs = ctypes.c_int(0), ctypes.c_long(0)
started = threading.Event()
worker_state = []


def worker():
    worker_state.append(this_thread_state())
    started.set()
    status = pin.pin_memory_loop(ctypes.byref(stop), ctypes.byref(pairs))  # @worker
    assert status == 0, status


def wait_for(n):
    while pairs.value < n:
        time.sleep(0.001)


t = threading.Thread(target=worker)
t.start()
started.wait()
wait_for(100)
slot = ctypes.c_void_p.from_address(worker_state[0] + offset)
good = slot.value
slot.value = unmapped + 4096 + 64
before = pairs.value
time.sleep(0.2)
during = pairs.value - before
slot.value = good
wait_for(pairs.value + 100)
stop.value = 1
t.join()
print("done", during)
