"""cupy_arrays.py — CuPy with its memory pool disabled (`cupy.cuda.set_allocator(None)`), so each
array is its own device allocation (with the pool on, freed blocks stay in the pool and only the
pool's chunks are visible).

Three arrays of 2 MiB are made; one is dropped (its free is seen), two are leaked by taking a
reference that is never released, so interpreter shutdown cannot free them before the exit dump.
CuPy reaches the driver through its own, statically linked runtime, which cannot be interposed:
the shim records the driver call and names it by the runtime's cudaMalloc in its stack.

The report must show ONE leak group: 2 allocations of 2 MiB (4 194 304 bytes) via cudaMalloc
(device memory), its first frame this script's LEAK-HERE line; nothing else live, no events.
GPU only: run by scripts/gpu-validate.sh as `cudaleak run -- python3 cuda-samples/python/cupy_arrays.py`.
"""
# EXPECT: leak marker=LEAK-HERE size=2097152 count=2 bytes=4194304 api=cudaMalloc kind=device

import ctypes

import cupy

cupy.cuda.set_allocator(None)  # no pool: every array is one cuMemAlloc / cuMemFree

N = 1 << 19  # float32 elements: 2 MiB

arrays = [cupy.zeros(N, dtype=cupy.float32) for _ in range(3)]  # LEAK-HERE
cupy.cuda.Device().synchronize()
del arrays[0]  # freed now

for a in arrays:
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(a))  # the leak: a reference nobody drops

print(f"cupy_arrays: {len(arrays)} arrays of {N * 4} bytes leaked")
