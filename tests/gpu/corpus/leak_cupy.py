"""leak_cupy: a CuPy image-filtering loop that keeps every filtered frame on the GPU in a list
"to write the video at the end" (1 MiB per step); the memory pool cannot reuse kept blocks.
Expected: a growth suspect at the `# LEAK` line. argv[1]: seconds (default 12)."""
import sys
import time

import cupy as cp

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 12
kernel = cp.ones((5, 5), dtype=cp.float32) / 25
frames = []
t_end = time.time() + seconds
while time.time() < t_end:
    frame = cp.random.random((512, 512), dtype=cp.float32)
    spectrum = cp.fft.rfft2(frame) * cp.fft.rfft2(kernel, s=frame.shape)
    filtered = cp.fft.irfft2(spectrum, s=frame.shape).astype(cp.float32)  # LEAK
    frames.append(filtered)
    time.sleep(0.01)
cp.cuda.Device().synchronize()
print(f"leak_cupy: {len(frames)} frames kept, mean {float(cp.mean(frames[-1])):.3f}")
