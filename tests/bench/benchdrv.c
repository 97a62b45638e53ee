/* benchdrv: a libcuda.so.1 that costs next to nothing, for measuring the shim's own overhead.
 * Allocations hand out addresses from a per-thread range (never backed by memory, never
 * touched); frees succeed. Only what the benchmark programs look up is there.
 *
 * BENCHDRV_EVICT=1 makes cuMemAlloc_v2 and cuMemFree_v2 do what a real driver's call does to the
 * caches: run through 1 024 distinct functions (one cache line each, 64 KiB of code, twice a
 * 32 KiB instruction cache) and write one byte in each line of 64 KiB of data, so that the shim
 * finds its own code and data cold at every call, as it does around a real cuMemAlloc (about
 * 1.5 us of driver work on an H200). `bench --cold` counts the shim's cache misses this way. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef unsigned long long CUdeviceptr;
typedef int CUresult;

static int next_thread;
static __thread unsigned long long cursor;

/* 4^5 = 1 024 functions, each of its own constant (an octal literal made of its name, so that no
 * two are identical and none is folded into another), each aligned to a cache line. */
#define EVICT_FN(n)                                                                          \
    __attribute__((noinline, aligned(64))) static unsigned evict_##n(unsigned x) {           \
        x ^= x >> 7;                                                                         \
        x *= 0##n##u + 2654435761u;                                                          \
        return x ^ (x << 3);                                                                 \
    }
#define EVICT_FN4(n) EVICT_FN(n##0) EVICT_FN(n##1) EVICT_FN(n##2) EVICT_FN(n##3)
#define EVICT_FN16(n) EVICT_FN4(n##0) EVICT_FN4(n##1) EVICT_FN4(n##2) EVICT_FN4(n##3)
#define EVICT_FN64(n) EVICT_FN16(n##0) EVICT_FN16(n##1) EVICT_FN16(n##2) EVICT_FN16(n##3)
#define EVICT_FN256(n) EVICT_FN64(n##0) EVICT_FN64(n##1) EVICT_FN64(n##2) EVICT_FN64(n##3)
EVICT_FN256(10) EVICT_FN256(11) EVICT_FN256(12) EVICT_FN256(13)

#define EVICT_CALL(n) x = evict_##n(x);
#define EVICT_CALL4(n) EVICT_CALL(n##0) EVICT_CALL(n##1) EVICT_CALL(n##2) EVICT_CALL(n##3)
#define EVICT_CALL16(n) EVICT_CALL4(n##0) EVICT_CALL4(n##1) EVICT_CALL4(n##2) EVICT_CALL4(n##3)
#define EVICT_CALL64(n) EVICT_CALL16(n##0) EVICT_CALL16(n##1) EVICT_CALL16(n##2) EVICT_CALL16(n##3)
#define EVICT_CALL256(n) EVICT_CALL64(n##0) EVICT_CALL64(n##1) EVICT_CALL64(n##2) EVICT_CALL64(n##3)

#define EVICT_DATA (64 * 1024)
static int evict = -1;
static unsigned evict_sink;
static volatile unsigned char evict_data[EVICT_DATA];

/* A real driver call's footprint, with BENCHDRV_EVICT=1 (see the top of the file). */
static void driver_work(void) {
    if (evict < 0) {
        const char *e = getenv("BENCHDRV_EVICT");
        evict = e && e[0] == '1';
    }
    if (!evict) return;
    unsigned x = evict_sink;
    EVICT_CALL256(10) EVICT_CALL256(11) EVICT_CALL256(12) EVICT_CALL256(13)
    evict_sink = x;
    for (size_t i = 0; i < EVICT_DATA; i += 64) evict_data[i]++;
}

EXPORT CUresult cuInit(unsigned flags) { (void)flags; return 0; }

EXPORT CUresult cuCtxGetDevice(int *device) {
    *device = 0;
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
    driver_work();
    if (cursor == 0)
        cursor = (unsigned long long)(__atomic_add_fetch(&next_thread, 1, __ATOMIC_RELAXED)) << 40;
    *dptr = cursor;
    cursor += (size + 255) & ~(size_t)255;
    return 0;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    driver_work();
    return dptr ? 0 : 1;
}

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
