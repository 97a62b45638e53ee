// pin_memory.c: a stand-in for PyTorch's pin-memory thread: native code that allocates and frees
// pinned host buffers in a loop with the GIL released (ctypes.CDLL releases it), so the thread is
// inside the shim's hooks nearly all the time. tests/python/*.py call it from Python threads.
// Must never: take the GIL or call back into Python.
#include "nullcudart.h"

#include <sched.h>

#define EXPORT __attribute__((visibility("default")))

// Allocates and frees 4 KiB pinned buffers until *stop is non-zero (forever if stop is NULL),
// counting each pair in *pairs; then allocates one more and leaves it live. Returns what
// cudaHostAlloc last returned.
EXPORT int pin_memory_loop(volatile int *stop, volatile long *pairs) {
    void *p = 0;
    cudaError_t e = cudaSuccess;
    while (!stop || !*stop) {
        e = cudaHostAlloc(&p, 4096, 0);
        if (e != cudaSuccess)
            return e;
        cudaFreeHost(p);
        if (pairs)
            ++*pairs;
        sched_yield(); // spinning, but not starving the other tests of a small machine
    }
    return cudaHostAlloc(&p, 8192, 0);
}
