"""ok_cupy_loop: a CuPy signal-processing loop: per step a batch of random signals of varying
length, an FFT filter, a matrix product and a reduction read back to the host. Temporaries go
back to CuPy's memory pool each step. Correct: no growth suspect. argv[1]: seconds (default 12)."""
import random
import sys
import time

import cupy as cp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
rng = random.Random(3)
mix = cp.random.standard_normal((256, 256), dtype=cp.float32)
energies = []
t_end = time.time() + seconds
while time.time() < t_end:
    n = rng.choice((4096, 8192, 16384, 32768))
    signals = cp.random.standard_normal((256, n), dtype=cp.float32)
    spectrum = cp.fft.rfft(signals, axis=1)
    spectrum[:, n // 8:] = 0
    filtered = cp.fft.irfft(spectrum, n=n, axis=1)
    mixed = mix @ filtered
    energies.append(float(cp.sum(mixed * mixed)))
cp.cuda.Device().synchronize()
print(f"ok_cupy_loop: {len(energies)} steps")
