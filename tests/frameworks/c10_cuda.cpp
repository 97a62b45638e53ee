// c10_cuda.cpp: a stand-in for PyTorch's libc10_cuda.so, with the names the shim sees in the real
// one: segments come from c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::
// alloc_block (cudaMalloc), tensors of the cudaMallocAsync backend from
// c10::cuda::CUDACachingAllocator::CudaMallocAsync::(anonymous namespace)::mallocAsync. A hook,
// when given, allocates instead of cudaMalloc: user code called from inside the allocator (as
// PyTorch's pluggable allocator calls the user's function).
// Must never: free anything (PyTorch does not empty its cache at exit).
#include "nullcudart.h"

#include <cstddef>

#define EXPORT __attribute__((visibility("default")))
#define KEEP(p) __asm__ volatile("" ::"g"(p) : "memory")

namespace c10 {
namespace cuda {
namespace CUDACachingAllocator {
namespace Native {

class DeviceCachingAllocator {
  public:
    __attribute__((noinline)) void *alloc_block(std::size_t size, void *(*hook)(std::size_t));
};

void *DeviceCachingAllocator::alloc_block(std::size_t size, void *(*hook)(std::size_t)) {
    void *p = nullptr;
    if (hook)
        p = hook(size);
    else if (cudaMalloc(&p, size) != cudaSuccess)
        p = nullptr;
    KEEP(p);
    return p;
}

} // namespace Native

namespace CudaMallocAsync {
namespace {
__attribute__((noinline)) void *mallocAsync(std::size_t size) {
    void *p = nullptr;
    if (cudaMallocAsync(&p, size, nullptr) != cudaSuccess)
        p = nullptr;
    KEEP(p);
    return p;
}
} // namespace
} // namespace CudaMallocAsync

} // namespace CUDACachingAllocator
} // namespace cuda
} // namespace c10

extern "C" EXPORT void *c10_cuda_malloc(std::size_t size, void *(*hook)(std::size_t)) {
    static c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator allocator;
    void *p = allocator.alloc_block(size, hook);
    KEEP(p);
    return p;
}

extern "C" EXPORT void *c10_cuda_malloc_async(std::size_t size) {
    void *p = c10::cuda::CUDACachingAllocator::CudaMallocAsync::mallocAsync(size);
    KEEP(p);
    return p;
}
