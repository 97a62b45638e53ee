"""numba_ok: numba-cuda device arrays (driver API through ctypes), copied in and out and
released. Correct: nothing leaks."""
import numpy as np
from numba import cuda

a = cuda.to_device(np.arange(1 << 20, dtype=np.float32))
b = cuda.device_array_like(a)
b.copy_to_device(a)
print("numba_ok:", float(b.copy_to_host().sum()))
del a, b
