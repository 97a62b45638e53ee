"""The fake's `torch.cuda`: lazy initialisation, devices, the allocator's backend and
statistics (see the package's docstring)."""

import os

from . import _allocator, memory  # noqa: F401


def is_available():
    return True


def init():
    _allocator.lazy_init()


def is_initialized():
    return _allocator.initialized


def device_count():
    return _allocator.DEVICES


def get_allocator_backend():
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return "cudaMallocAsync" if "backend:cudaMallocAsync" in conf else "native"


def memory_stats(device=None):
    """PyTorch's flattened form: `allocated_bytes.all.current` and so on; {} before init."""
    if not is_initialized():
        return {}
    out = {}

    def flatten(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                flatten(prefix + "." + k if prefix else k, x)
        else:
            out[prefix] = v

    flatten("", _allocator.nested_stats(0 if device is None else int(device)))
    return out


def memory_allocated(device=None):
    return _allocator._allocated[0 if device is None else int(device)] if is_initialized() else 0


def synchronize(device=None):
    pass


def empty_cache():
    pass
