/* benchdrv: a libcuda.so.1 that costs next to nothing, for measuring the shim's own overhead.
 * Allocations hand out addresses from a per-thread range (never backed by memory, never
 * touched); frees succeed. Only what the benchmark programs look up is there.
 *
 * BENCHDRV_EVICT=1 makes cuMemAlloc_v2 and cuMemFree_v2 do what a real driver's call does to the
 * caches: run through 1 024 distinct functions (one cache line each, 64 KiB of code, twice a
 * 32 KiB instruction cache) and write one byte in each line of 64 KiB of data, so that the shim
 * finds its own code and data cold at every call, as it does around a real cuMemAlloc (about
 * 1.5 us of driver work on an H200). `bench --cold` counts the shim's cache misses this way.
 * BENCHDRV_EVICT=N (N > 1) writes N times 64 KiB of data instead, to push what the shim reads out
 * of the second-level cache too (a PyTorch tensor's path between two allocations: the
 * dispatcher, the caching allocator, the driver), where the first level alone is not enough.
 *
 * BENCHDRV_SPIN_NS=N makes every allocation and free (cuMemAlloc_v2, cuMemFree_v2 and their
 * stream-ordered forms) compute for about N ns first, as a real driver's call takes 1-2 us of a
 * core: threads then spend most of their time in the driver, each on its own core, and what
 * they share in the shim is what is left to queue on (scripts/thread-scaling.sh). The spin is a
 * loop of dependent multiplications whose speed is measured once, at load: work, not a
 * deadline, so a thread descheduled mid-call still owes the rest of its call, as with a real
 * driver. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static int evict;
static unsigned evict_sink;
static volatile unsigned char *evict_data;

/* BENCHDRV_SPIN_NS's loop: `n` dependent multiply-adds; returns its result, so none is dropped. */
__attribute__((noinline)) static unsigned long long spin(unsigned long long n) {
    unsigned long long x = n | 1;
    for (unsigned long long i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static double mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Iterations of `spin` per call, from BENCHDRV_SPIN_NS: set once at load, before the program's
 * threads start, from the fastest of five timed loops (the others were interrupted). */
static unsigned long long spin_iterations;
static volatile unsigned long long spin_sink;

__attribute__((constructor)) static void spin_setup(void) {
    const char *e = getenv("BENCHDRV_SPIN_NS");
    double ns = e ? atof(e) : 0;
    if (ns <= 0) return;
    const unsigned long long probe = 1000000;
    double best = 0;
    for (int i = 0; i < 5; i++) {
        double t0 = mono_ns();
        spin_sink = spin(probe);
        double t = mono_ns() - t0;
        if (best == 0 || t < best) best = t;
    }
    spin_iterations = (unsigned long long)(ns * (double)probe / best + 0.5);
    if (spin_iterations == 0) spin_iterations = 1;
}

/* BENCHDRV_EVICT, read once at load (before any thread can call in). */
__attribute__((constructor)) static void evict_init(void) {
    const char *e = getenv("BENCHDRV_EVICT");
    int n = e ? atoi(e) : 0;
    evict_data = n > 0 ? calloc((size_t)n, EVICT_DATA) : NULL;
    evict = evict_data ? n : 0;
}

/* A real driver call's footprint, with BENCHDRV_EVICT=1 (see the top of the file), and its time,
 * with BENCHDRV_SPIN_NS. */
static void driver_work(void) {
    if (spin_iterations) spin_sink = spin(spin_iterations);
    if (!evict) return;
    unsigned x = evict_sink;
    EVICT_CALL256(10) EVICT_CALL256(11) EVICT_CALL256(12) EVICT_CALL256(13)
    evict_sink = x;
    for (size_t i = 0; i < (size_t)evict * EVICT_DATA; i += 64) evict_data[i]++;
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
    if (spin_iterations) spin_sink = spin(spin_iterations);
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
