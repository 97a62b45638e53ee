"""cupy_keep: CuPy with its default pool, keeping one 1 MiB array per step in a list (a history
never trimmed): the leak only a snapshot series shows, since the pool keeps its chunks and the
list is freed at shutdown. argv[1]: seconds (default 5)."""
import sys
import time

import cupy as cp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5
history = []
t_end = time.time() + seconds
while time.time() < t_end:
    a = cp.random.random((512, 512), dtype=cp.float32)
    history.append(a @ a)  # 1 MiB kept per step
    time.sleep(0.02)
cp.cuda.Device().synchronize()
print(f"cupy_keep: {len(history)} arrays kept")
