"""A stand-in for PyTorch on the null-device runtime, for the pytest plugin's tests: just enough
of `torch` for the plugin to empty its pool, with a caching allocator that behaves as PyTorch's
does where it matters here. Segments come from the libc10_cuda.so stand-in
(tests/frameworks/c10_cuda.cpp), so the shim sees them under PyTorch's own names
(`DeviceCachingAllocator::alloc_block`: the pytorch-native cache rule); a freed tensor's segment
goes back to the pool, not to the driver, until `torch.cuda.empty_cache()`; `memory_reserved()`
is what the pool holds from the driver. Requests of 1 MiB or
less share one 2 MiB segment (PyTorch's small pool), so a small tensor kept by a test may lie in a
segment live before it: only PyTorch's own count (`torch.cuda.memory_allocated()`) and its record
of live blocks (`torch.cuda.memory._snapshot()`, with the Python frames of each allocation,
innermost first) show it. With
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (`--cudaleak-exact-pools`) every tensor is its own
`cudaMallocAsync` from `CudaMallocAsync::mallocAsync`, freed with it (pytorch-async).

Not PyTorch: no data, no kernels; `empty(nbytes)` only."""
import ctypes
import os
import traceback

_dirs = os.environ["FRAMEWORKS_DIR"], os.environ["NULLCUDA_DIR"]
_c10 = ctypes.CDLL(os.path.join(_dirs[0], "libc10_cuda.so"))
_rt = ctypes.CDLL(os.path.join(_dirs[1], "libcudart.so.13"))
_c10.c10_cuda_malloc.restype = ctypes.c_void_p
_c10.c10_cuda_malloc.argtypes = [ctypes.c_size_t, ctypes.c_void_p]
_c10.c10_cuda_malloc_async.restype = ctypes.c_void_p
_c10.c10_cuda_malloc_async.argtypes = [ctypes.c_size_t]
_rt.cudaFree.argtypes = [ctypes.c_void_p]
_rt.cudaFreeAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p]

_ASYNC = "backend:cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
_free = {}  # size -> [segment, ...]: the pool's segments no tensor uses
_initialized = False
SMALL = 1 << 20  # requests up to this size share the small segment
SMALL_SEGMENT = 2 << 20
_small = {"segment": None, "used": 0, "live": 0}  # bump pointer; reset when no small tensor lives
_live = {}  # address -> (bytes, frames): the tensors alive
_segments = {}  # address -> bytes: the driver allocations the pool holds (memory_reserved)
_recording = False


def _frames():
    """The caller's Python frames, innermost first, as PyTorch records them."""
    stack = traceback.extract_stack()[:-3]  # without _frames, Tensor.__init__ and empty
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(stack)]


class Tensor:
    def __init__(self, nbytes):
        global _initialized
        _initialized = True
        self.nbytes = nbytes
        if _ASYNC:
            self.ptr = _c10.c10_cuda_malloc_async(nbytes)
        elif nbytes <= SMALL:
            if _small["segment"] is None:
                _small["segment"] = _c10.c10_cuda_malloc(SMALL_SEGMENT, None)
                _segments[_small["segment"]] = SMALL_SEGMENT
            if _small["live"] == 0:
                _small["used"] = 0
            assert _small["used"] + nbytes <= SMALL_SEGMENT, "the fake small pool is full"
            self.ptr = _small["segment"] + _small["used"]
            _small["used"] += nbytes
            _small["live"] += 1
        else:
            cached = _free.get(nbytes)
            self.ptr = cached.pop() if cached else _c10.c10_cuda_malloc(nbytes, None)
            _segments[self.ptr] = nbytes
        assert self.ptr
        _live[self.ptr] = (nbytes, _frames() if _recording else [])

    def __del__(self):
        del _live[self.ptr]
        if _ASYNC:
            _rt.cudaFreeAsync(self.ptr, None)
        elif self.nbytes <= SMALL:
            _small["live"] -= 1
        else:
            _free.setdefault(self.nbytes, []).append(self.ptr)


def empty(nbytes):
    return Tensor(nbytes)


class cuda:  # noqa: N801 - the module's name in PyTorch
    @staticmethod
    def is_initialized():
        return _initialized

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def empty_cache():
        for segments in _free.values():
            for p in segments:
                assert _rt.cudaFree(p) == 0
                del _segments[p]
            segments.clear()
        if _small["segment"] is not None and _small["live"] == 0:
            assert _rt.cudaFree(_small["segment"]) == 0
            del _segments[_small["segment"]]
            _small["segment"] = None

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def get_allocator_backend():
        return "cudaMallocAsync" if _ASYNC else "native"

    @staticmethod
    def memory_allocated(device=None):
        return sum(nbytes for nbytes, _ in _live.values())

    @staticmethod
    def memory_reserved(device=None):
        return 0 if _ASYNC else sum(_segments.values())

    class memory:  # noqa: N801
        @staticmethod
        def _record_memory_history(enabled="all", context="all", stacks="all", **_):
            global _recording
            _recording = enabled is not None

        @staticmethod
        def _snapshot():
            blocks = [
                {"address": p, "size": n, "state": "active_allocated", "frames": frames}
                for p, (n, frames) in _live.items()
            ]
            return {"segments": [{"blocks": blocks}]}
