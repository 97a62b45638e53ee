"""The fake's extension module: the allocator's nested statistics, as PyTorch's
`torch._C._cuda_memoryStats(device)` gives them (absent with FAKE_TORCH_NO_C=1)."""

import os

from .cuda import _allocator

if os.environ.get("FAKE_TORCH_NO_C") != "1":

    def _cuda_memoryStats(device):
        return _allocator.nested_stats(device)
