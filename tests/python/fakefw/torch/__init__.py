"""A stand-in for PyTorch, for the bootstrap's tests on machines without a GPU
(tests/tests/frameworks.rs): just what python/cudaleak/_bootstrap.py calls, over "tensors" that
are Python objects counted while they live. It never touches a device.

`torch.empty(nbytes, device=0)` makes a tensor and initialises "CUDA" on first use, as PyTorch
does lazily. `torch.cuda` has is_initialized(), device_count() (FAKE_TORCH_DEVICES, 2),
memory_allocated(d), synchronize(), empty_cache() (which does nothing),
get_allocator_backend() (`cudaMallocAsync` when PYTORCH_CUDA_ALLOC_CONF says
`backend:cudaMallocAsync`, else `native`) and memory_stats(d); `torch._C._cuda_memoryStats(d)`
is the nested dict it flattens (absent with FAKE_TORCH_NO_C=1). `torch.cuda.memory` has
_record_memory_history(...) (raises with FAKE_TORCH_HISTORY=fail) and _snapshot(); once the
record is on, each new tensor keeps the Python frames that made it, innermost first
(FAKE_TORCH_FRAMES=outermost_first lists them the other way round).
"""

import sys

from . import _C, cuda  # noqa: F401
from .cuda import _allocator


class Tensor:
    __slots__ = ("nbytes", "device", "_key")

    def __init__(self, nbytes, device, caller):
        self.nbytes, self.device = nbytes, device
        self._key = _allocator.alloc(nbytes, device, caller)

    def __del__(self, free=_allocator.free):
        try:
            free(self._key)
        except Exception:
            pass  # the interpreter is tearing the fake down


def empty(nbytes, device=0):
    return Tensor(int(nbytes), int(device), sys._getframe(1))
