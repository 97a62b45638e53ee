"""cupy_handles: CuPy calls that make CuPy create its library handles: a matmul (the device's
cuBLAS handle), cupy.fft.fft (a cuFFT plan, kept in CuPy's plan cache) and cupy.random (the
device's cuRAND generator). CuPy makes each once per device (and thread) and keeps it: held,
not leaked. Under `cudaleak run` it must exit 0.
Run by scripts/gpu-handles.sh; by hand: cudaleak run -- python3 tests/gpu/handles/cupy_handles.py
"""
import cupy as cp

acc = cp.zeros((256, 256), dtype=cp.float32)
for _ in range(10):
    a = cp.random.random((256, 256), dtype=cp.float32)
    acc += a @ a.T
    acc += cp.abs(cp.fft.fft(a, axis=-1)).astype(cp.float32) * 1e-6
cp.cuda.Device().synchronize()
assert float(acc.sum()) > 0
print("cupy_handles: 10 steps, done")
