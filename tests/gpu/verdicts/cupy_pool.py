"""CuPy with its default pools and an FFT plan: expected exit 0, cupy-pool (and cufft) held."""
import cupy

a = cupy.arange(1 << 20, dtype=cupy.float32)
b = (a * 2).sum()
c = cupy.fft.fft(a[:4096])
h = cupy.asnumpy(a[:16])
print("cupy_pool ok", float(b), c.shape, h.shape)
