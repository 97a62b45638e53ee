"""cupy_ok: CuPy arithmetic with its default memory pool. Correct: every array is released;
the pool keeps its chunks until exit."""
import cupy as cp

acc = cp.zeros((1024, 1024), dtype=cp.float32)
for i in range(20):
    a = cp.random.random((1024, 1024), dtype=cp.float32)
    acc += a @ a.T
cp.cuda.Device().synchronize()
print("cupy_ok:", float(acc.sum()) > 0)
