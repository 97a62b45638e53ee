"""A stand-in for PyTorch on the null-device runtime, for the pytest plugin's tests: just enough
of `torch` for the plugin to empty its pool, with a caching allocator that behaves as PyTorch's
does where it matters here. Segments come from the libc10_cuda.so stand-in
(tests/frameworks/c10_cuda.cpp), so the shim sees them under PyTorch's own names
(`DeviceCachingAllocator::alloc_block`: the pytorch-native cache rule); a freed tensor's segment
goes back to the pool, not to the driver, until `torch.cuda.empty_cache()`. With
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (`--cudaleak-exact-pools`) every tensor is its own
`cudaMallocAsync` from `CudaMallocAsync::mallocAsync`, freed with it (pytorch-async).

Not PyTorch: no data, no kernels; `empty(nbytes)` only."""
import ctypes
import os

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


class Tensor:
    def __init__(self, nbytes):
        global _initialized
        _initialized = True
        self.nbytes = nbytes
        if _ASYNC:
            self.ptr = _c10.c10_cuda_malloc_async(nbytes)
        else:
            cached = _free.get(nbytes)
            self.ptr = cached.pop() if cached else _c10.c10_cuda_malloc(nbytes, None)
        assert self.ptr

    def __del__(self):
        if _ASYNC:
            _rt.cudaFreeAsync(self.ptr, None)
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
            segments.clear()
