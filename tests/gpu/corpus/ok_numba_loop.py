"""ok_numba_loop: a numba-cuda loop: per step host data copied to new device arrays, a kernel,
a device-side result copied back; the arrays go out of scope each step (numba frees them in
batches of pending deallocations). Correct: no growth suspect. argv[1]: seconds (default 12)."""
import sys
import time

import numpy as np
from numba import cuda

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


rng = np.random.default_rng(4)
steps = 0
checksum = 0.0
t_end = time.time() + seconds
while time.time() < t_end:
    n = int(rng.choice((1 << 18, 1 << 20, 1 << 22)))
    x = cuda.to_device(rng.random(n, dtype=np.float32))
    y = cuda.to_device(rng.random(n, dtype=np.float32))
    out = cuda.device_array(n, dtype=np.float32)
    saxpy[(n + 255) // 256, 256](np.float32(2.0), x, y, out)
    checksum += float(out.copy_to_host()[:16].sum())
    steps += 1
cuda.synchronize()
print(f"ok_numba_loop: {steps} steps, checksum {checksum:.1f}")
