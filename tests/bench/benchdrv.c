/* benchdrv: a libcuda.so.1 that costs next to nothing, for measuring the shim's own overhead.
 * Allocations hand out addresses from a per-thread range (never backed by memory, never
 * touched); frees succeed. Only what the benchmark programs look up is there. */
#include <stddef.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef unsigned long long CUdeviceptr;
typedef int CUresult;

static int next_thread;
static __thread unsigned long long cursor;

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return 0; }

EXPORT CUresult cuCtxGetDevice(int *device) {
    *device = 0;
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
    if (cursor == 0)
        cursor = (unsigned long long)(__atomic_add_fetch(&next_thread, 1, __ATOMIC_RELAXED)) << 40;
    *dptr = cursor;
    cursor += (size + 255) & ~(size_t)255;
    return 0;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return dptr ? 0 : 1; }

/* Stream-ordered, as PyTorch's cudaMallocAsync backend (--exact-pools) reaches the driver. */
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, void *stream) {
    (void)stream;
    return cuMemAlloc_v2(dptr, size);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, void *stream) {
    (void)stream;
    return dptr ? 0 : 1;
}

EXPORT CUresult cuStreamIsCapturing(void *stream, int *status) {
    (void)stream;
    *status = 0;
    return 0;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    unsigned long long flags, int *status) {
    (void)version;
    (void)flags;
    *pfn = NULL;
    if (!strcmp(symbol, "cuMemAlloc")) *pfn = (void *)cuMemAlloc_v2;
    if (!strcmp(symbol, "cuMemFree")) *pfn = (void *)cuMemFree_v2;
    if (!strcmp(symbol, "cuMemAllocAsync")) *pfn = (void *)cuMemAllocAsync;
    if (!strcmp(symbol, "cuMemFreeAsync")) *pfn = (void *)cuMemFreeAsync;
    if (!strcmp(symbol, "cuStreamIsCapturing")) *pfn = (void *)cuStreamIsCapturing;
    if (!strcmp(symbol, "cuInit")) *pfn = (void *)cuInit;
    if (!strcmp(symbol, "cuCtxGetDevice")) *pfn = (void *)cuCtxGetDevice;
    if (!strcmp(symbol, "cuGetProcAddress")) *pfn = (void *)cuGetProcAddress_v2;
    if (status) *status = *pfn ? 0 : 1;
    return 0;
}
