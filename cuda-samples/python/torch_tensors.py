"""torch_tensors.py — PyTorch's CUDA allocator with its cache turned off, so each tensor is its
own cudaMalloc (with the cache on, PyTorch keeps freed segments and a leak checker sees only the
segments, never the tensors).

Four tensors of 1 MiB are made on the GPU; one is dropped (its cudaFree is seen), three are
leaked: a reference to each is taken and never released — what a C extension that forgets a
Py_DECREF does — so not even interpreter shutdown frees them before the shim's exit dump.

The report must show ONE leak group: 3 allocations of 1 MiB (3 145 728 bytes) via cudaMalloc
(device memory), called from PyTorch's libc10_cuda.so, its first frame this script's LEAK-HERE
line (the shim records the Python frames, though PyTorch releases the GIL); nothing else live,
no events.
GPU only: run by scripts/gpu-validate.sh as `cudaleak run -- python3 cuda-samples/python/torch_tensors.py`.
"""
# EXPECT: leak marker=LEAK-HERE size=1048576 count=3 bytes=3145728 api=cudaMalloc kind=device module=libc10_cuda.so

import ctypes
import os

# Must be set before torch initialises CUDA.
os.environ["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"

import torch  # noqa: E402

N = 1 << 18  # float32 elements: 1 MiB

tensors = [torch.full((N,), float(i), dtype=torch.float32, device="cuda") for i in range(4)]  # LEAK-HERE
torch.cuda.synchronize()
del tensors[0]  # freed now: cudaFree

for t in tensors:
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(t))  # the leak: a reference nobody drops

print(f"torch_tensors: {len(tensors)} tensors of {N * 4} bytes leaked on {torch.cuda.get_device_name()}")
