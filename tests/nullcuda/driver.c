/* driver.c: the null-device libcuda.so.1.
 *
 * Owns: "device" memory served from the host heap, a table of live blocks that rejects double
 * and invalid frees like the real driver, an allocation size limit, and cuGetProcAddress
 * resolution by base name + cudaVersion + flags (rules in shared/notes/cuda-interception.md).
 * Must never: depend on any CUDA header, call the runtime, or change errno on success.
 * Deliberate for tests: a failed call sets errno (ENOMEM / EINVAL) so that tests can see
 * whether an interposer passes errno through. */
#define _GNU_SOURCE
#include "nullcuda.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifndef MAP_32BIT
/* x86-64 only: elsewhere (aarch64) a v1 block lands below 4 GiB only by chance, and
 * cuMemAlloc (v1) answers CUDA_ERROR_OUT_OF_MEMORY otherwise, as a real 2.x driver would. */
#define MAP_32BIT 0
#endif

#define EXPORT __attribute__((visibility("default")))

enum block_class {
    BLOCK_DEVICE,
    BLOCK_HOST,
    BLOCK_ARRAY,
    BLOCK_PHYSICAL,
    /* Issue 12. Registered, reserved and mapped ranges are bookkeeping: no memory of ours. */
    BLOCK_REGISTERED,
    BLOCK_IPC,
    BLOCK_RESERVED,
    BLOCK_MAPPED,
};

/* Whether a class's bytes count as used device memory (cuMemGetInfo). */
static int counts_as_used(enum block_class cls) {
    return cls != BLOCK_REGISTERED && cls != BLOCK_RESERVED && cls != BLOCK_MAPPED;
}

struct block {
    CUdeviceptr key; /* address, or handle value for arrays and physical allocations */
    size_t size;
    enum block_class cls;
    int mmapped; /* v1 blocks live below 4 GiB (MAP_32BIT); GRAPH_OWNED: a graph node's address */
    struct block *next;
};

#define GRAPH_OWNED 2

#define BUCKETS (1u << 16)
static struct block *table[BUCKETS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t used_bytes;
static int initialized;
static size_t mem_limit = (size_t)16 << 30;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* NULLCUDA_ASYNC_NEEDS_CONTEXT=1: cuMemAllocAsync on a thread with no current context fails
 * with CUDA_ERROR_INVALID_CONTEXT, as the real driver does on a new thread before the runtime
 * has bound its primary context there (the runtime then binds it and retries). */
static int async_needs_context;

/* Fork safety: a child forked while another thread held the table's lock would otherwise wait
 * for it forever (the real driver does not survive fork at all; this one must, for the shim's
 * fork tests). */
static void before_fork(void) { pthread_mutex_lock(&table_lock); }
static void after_fork(void) { pthread_mutex_unlock(&table_lock); }
__attribute__((constructor)) static void register_fork_handlers(void) {
    pthread_atfork(before_fork, after_fork, after_fork);
}

static void read_config(void) {
    int saved = errno;
    const char *nc = getenv("NULLCUDA_ASYNC_NEEDS_CONTEXT");
    async_needs_context = nc && *nc == '1';
    const char *v = getenv("NULLCUDA_MEM_LIMIT");
    if (v && *v) {
        char *end = NULL;
        unsigned long long n = strtoull(v, &end, 10);
        if (end && *end == '\0')
            mem_limit = (size_t)n;
    }
    errno = saved;
}

static unsigned bucket_of(CUdeviceptr key) {
    return (unsigned)((key >> 4) ^ (key >> 20) ^ (key >> 36)) & (BUCKETS - 1);
}

static CUresult fail(CUresult r) {
    errno = (r == CUDA_ERROR_OUT_OF_MEMORY) ? ENOMEM : EINVAL;
    return r;
}

/* Test hook: while non-zero, every allocation and free fails with this code, as the real driver
 * answers once it is tearing down (4 CUDA_ERROR_DEINITIALIZED, 201 CUDA_ERROR_INVALID_CONTEXT,
 * 3 CUDA_ERROR_NOT_INITIALIZED). Not a CUDA API: scenarios call it by name. */
static int shutdown_code;

EXPORT void nullcuda_shutdown(int code) { __atomic_store_n(&shutdown_code, code, __ATOMIC_RELEASE); }

static int shutting_down(void) { return __atomic_load_n(&shutdown_code, __ATOMIC_ACQUIRE); }

static int is_initialized(void) { return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE); }

/* Records a block; 0 on success, -1 when no table node could be allocated. */
static int table_insert(CUdeviceptr key, size_t size, enum block_class cls, int mmapped) {
    struct block *b = malloc(sizeof *b);
    if (!b)
        return -1;
    b->key = key;
    b->size = size;
    b->cls = cls;
    b->mmapped = mmapped;
    pthread_mutex_lock(&table_lock);
    unsigned i = bucket_of(key);
    b->next = table[i];
    table[i] = b;
    if (counts_as_used(cls))
        used_bytes += size;
    pthread_mutex_unlock(&table_lock);
    return 0;
}

/* Unlinks and returns the block with this key and class, or NULL if it is not live. */
static struct block *table_remove(CUdeviceptr key, enum block_class cls) {
    pthread_mutex_lock(&table_lock);
    struct block **p = &table[bucket_of(key)];
    while (*p && !((*p)->key == key && (*p)->cls == cls))
        p = &(*p)->next;
    struct block *b = *p;
    if (b) {
        *p = b->next;
        if (counts_as_used(b->cls))
            used_bytes -= b->size;
    }
    pthread_mutex_unlock(&table_lock);
    return b;
}

/* Finds the block containing [addr, addr+len) (device or host class), for copies. */
static int range_is_live(CUdeviceptr addr, size_t len) {
    int found = 0;
    pthread_mutex_lock(&table_lock);
    for (unsigned i = 0; i < BUCKETS && !found; i++)
        for (struct block *b = table[i]; b; b = b->next)
            if ((b->cls == BLOCK_DEVICE || b->cls == BLOCK_HOST || b->cls == BLOCK_REGISTERED ||
                 b->cls == BLOCK_IPC || b->cls == BLOCK_MAPPED) &&
                addr >= b->key &&
                addr + len <= b->key + b->size) {
                found = 1;
                break;
            }
    pthread_mutex_unlock(&table_lock);
    return found;
}

static void *heap_alloc(size_t size) {
    size_t rounded = (size + 255) & ~(size_t)255;
    return aligned_alloc(256, rounded);
}

/* The common allocation path: limit check, heap, table. */
static CUresult alloc_block(CUdeviceptr *out, size_t size, enum block_class cls) {
    pthread_once(&config_once, read_config);
    if (shutting_down())
        return fail(shutting_down());
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!out || size == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (size > mem_limit)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    int saved = errno;
    void *p = heap_alloc(size);
    if (!p)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    if (table_insert((CUdeviceptr)(uintptr_t)p, size, cls, 0) != 0) {
        free(p);
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    }
    errno = saved;
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult free_block(CUdeviceptr key, enum block_class cls) {
    if (shutting_down())
        return fail(shutting_down());
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (key == 0)
        return CUDA_SUCCESS;
    int saved = errno;
    struct block *b = table_remove(key, cls);
    if (!b)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (b->mmapped == GRAPH_OWNED)
        ; /* the graph's node keeps the address for its next launch */
    else if (b->mmapped)
        munmap((void *)(uintptr_t)b->key, b->size);
    else
        free((void *)(uintptr_t)b->key);
    free(b);
    errno = saved;
    return CUDA_SUCCESS;
}

static struct CUgraph_st *capturing_graph(CUstream stream);
static CUresult capture_alloc(CUstream stream, CUdeviceptr *dptr, size_t size);
static CUresult capture_free(CUstream stream, CUdeviceptr dptr);

/* ---- initialization, devices, contexts, streams ---- */

static struct CUctx_st { int dummy; } primary_ctx;
static __thread CUcontext current_ctx;
static struct CUmemPoolHandle_st { int dummy; } default_pool;

EXPORT CUresult cuInit(unsigned int flags) {
    pthread_once(&config_once, read_config);
    if (flags != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *version) {
    if (!version)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *version = 13000;
    return CUDA_SUCCESS;
}

/* NULLCUDA_DEVICES (default 1) devices; the current context is on NULLCUDA_CURRENT_DEVICE
 * (default 0). Nothing else differs between them. */
static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

EXPORT CUresult cuDeviceGetCount(int *count) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!count)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *count = env_int("NULLCUDA_DEVICES", 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!device)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (ordinal != 0)
        return fail(CUDA_ERROR_INVALID_DEVICE);
    *device = 0;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!name || len <= 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (dev != 0)
        return fail(CUDA_ERROR_INVALID_DEVICE);
    strncpy(name, "nullcuda device", (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    pthread_once(&config_once, read_config);
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!bytes)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (dev != 0)
        return fail(CUDA_ERROR_INVALID_DEVICE);
    *bytes = mem_limit;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!ctx)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (dev != 0)
        return fail(CUDA_ERROR_INVALID_DEVICE);
    *ctx = &primary_ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    return dev == 0 ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_DEVICE);
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!pool)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (dev != 0)
        return fail(CUDA_ERROR_INVALID_DEVICE);
    *pool = &default_pool;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice dev) {
    (void)flags;
    CUresult r = cuDevicePrimaryCtxRetain(ctx, dev);
    if (r == CUDA_SUCCESS)
        current_ctx = *ctx;
    return r;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (ctx != &primary_ctx)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (current_ctx == ctx)
        current_ctx = NULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    current_ctx = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!ctx)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *ctx = current_ctx;
    return CUDA_SUCCESS;
}

/* One device, always current: a cheap answer for interposers that want an ordinal. */
EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!device)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *device = env_int("NULLCUDA_CURRENT_DEVICE", 0);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
    return is_initialized() ? CUDA_SUCCESS : fail(CUDA_ERROR_NOT_INITIALIZED);
}

EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    (void)flags;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!stream)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    *stream = malloc(16);
    errno = saved;
    return *stream ? CUDA_SUCCESS : fail(CUDA_ERROR_OUT_OF_MEMORY);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!stream)
        return fail(CUDA_ERROR_INVALID_VALUE);
    free(stream);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream stream) {
    (void)stream;
    return is_initialized() ? CUDA_SUCCESS : fail(CUDA_ERROR_NOT_INITIALIZED);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    pthread_once(&config_once, read_config);
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!free_bytes || !total_bytes)
        return fail(CUDA_ERROR_INVALID_VALUE);
    pthread_mutex_lock(&table_lock);
    size_t used = used_bytes;
    pthread_mutex_unlock(&table_lock);
    *total_bytes = mem_limit;
    *free_bytes = used < mem_limit ? mem_limit - used : 0;
    return CUDA_SUCCESS;
}

/* ---- memory ---- */

/* The CUDA 2.x ABI: 32-bit device pointers, so the block must live below 4 GiB. */
EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    pthread_once(&config_once, read_config);
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!dptr || bytesize == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (bytesize > mem_limit)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    int saved = errno;
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (p == MAP_FAILED || (uintptr_t)p > UINT32_MAX)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    if (table_insert((CUdeviceptr)(uintptr_t)p, bytesize, BLOCK_DEVICE, 1) != 0) {
        munmap(p, bytesize);
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    }
    errno = saved;
    *dptr = (CUdeviceptr_v1)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return free_block(dptr, BLOCK_DEVICE); }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

/* Not a real driver function: the form of cuMemAlloc a driver newer than every runtime and shim
 * might add (another argument list), handed out for cudaVersion 99000 and above, so a test can
 * ask the shim what it does with a form its table does not know. */
EXPORT CUresult cuMemAlloc_v3(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    if (flags != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                   unsigned int ElementSizeBytes) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return fail(CUDA_ERROR_INVALID_VALUE);
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (Height > SIZE_MAX / pitch)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    CUresult r = alloc_block(dptr, pitch * Height, BLOCK_DEVICE);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return free_block(dptr, BLOCK_DEVICE); }

/* Managed memory is plain host memory, so host code can touch it. */
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
    if (Flags & ~0x0fu)
        return fail(CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr p = 0;
    CUresult r = alloc_block(pp ? &p : NULL, bytesize, BLOCK_HOST);
    if (r == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)p;
    return r;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }

EXPORT CUresult cuMemFreeHost(void *p) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    return free_block((CUdeviceptr)(uintptr_t)p, BLOCK_HOST); /* NULL is a no-op success */
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    if (async_needs_context && !current_ctx)
        return fail(CUDA_ERROR_INVALID_CONTEXT);
    if (capturing_graph(hStream))
        return capture_alloc(hStream, dptr, bytesize);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    if (async_needs_context && !current_ctx)
        return fail(CUDA_ERROR_INVALID_CONTEXT);
    if (capturing_graph(hStream))
        return capture_alloc(hStream, dptr, bytesize);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    if (capturing_graph(hStream))
        return capture_free(hStream, dptr);
    return free_block(dptr, BLOCK_DEVICE);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    if (capturing_graph(hStream))
        return capture_free(hStream, dptr);
    return free_block(dptr, BLOCK_DEVICE);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream) {
    (void)hStream;
    if (!pool)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
    (void)hStream;
    if (!pool)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return alloc_block(dptr, bytesize, BLOCK_DEVICE);
}

/* Physical allocations get a handle (a heap address nobody may dereference) and no backing:
 * cuMemMap makes the reserved range itself usable. */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    pthread_once(&config_once, read_config);
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!handle || !prop || size == 0 || flags != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (size > mem_limit)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    int saved = errno;
    void *h = malloc(16);
    if (!h)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    if (table_insert((CUdeviceptr)(uintptr_t)h, size, BLOCK_PHYSICAL, 0) != 0) {
        free(h);
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    }
    errno = saved;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (handle == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return free_block(handle, BLOCK_PHYSICAL);
}

/* ---- virtual memory: reserved ranges are PROT_NONE mappings; cuMemMap makes a range usable.
 * Two mappings of one physical handle do NOT share memory (each gets fresh zero pages). ---- */

#define VMM_GRANULARITY ((size_t)2 << 20)

static size_t physical_size(CUmemGenericAllocationHandle handle) {
    size_t size = 0;
    pthread_mutex_lock(&table_lock);
    for (struct block *b = table[bucket_of(handle)]; b; b = b->next)
        if (b->key == handle && b->cls == BLOCK_PHYSICAL)
            size = b->size;
    pthread_mutex_unlock(&table_lock);
    return size;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop, int option) {
    (void)option;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!granularity || !prop)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                    unsigned long long flags) {
    (void)alignment, (void)addr;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!ptr || size == 0 || size % VMM_GRANULARITY != 0 || flags != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    if (table_insert((CUdeviceptr)(uintptr_t)p, size, BLOCK_RESERVED, 0) != 0) {
        munmap(p, size);
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    }
    errno = saved;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Only a whole reservation, by its start and size, can be freed (as the real driver insists). */
EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    int saved = errno;
    struct block *b = ptr ? table_remove(ptr, BLOCK_RESERVED) : NULL;
    if (!b)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (b->size != size) {
        table_insert(b->key, b->size, BLOCK_RESERVED, 0);
        free(b);
        return fail(CUDA_ERROR_INVALID_VALUE);
    }
    munmap((void *)(uintptr_t)ptr, size);
    free(b);
    errno = saved;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                         unsigned long long flags) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    size_t phys = physical_size(handle);
    if (!ptr || size == 0 || flags != 0 || phys == 0 || offset > phys || size > phys - offset)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    if (mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (table_insert(ptr, size, BLOCK_MAPPED, 0) != 0)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    errno = saved;
    return CUDA_SUCCESS;
}

/* Unmaps every mapping that starts in [ptr, ptr + size); none there is an error. */
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!ptr || size == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    int unmapped = 0;
    for (;;) {
        CUdeviceptr key = 0;
        pthread_mutex_lock(&table_lock);
        for (unsigned i = 0; i < BUCKETS && !key; i++)
            for (struct block *b = table[i]; b; b = b->next)
                if (b->cls == BLOCK_MAPPED && b->key >= ptr && b->key - ptr < size) {
                    key = b->key;
                    break;
                }
        pthread_mutex_unlock(&table_lock);
        struct block *b = key ? table_remove(key, BLOCK_MAPPED) : NULL;
        if (!b)
            break;
        madvise((void *)(uintptr_t)b->key, b->size, MADV_DONTNEED);
        mprotect((void *)(uintptr_t)b->key, b->size, PROT_NONE);
        free(b);
        unmapped++;
    }
    if (!unmapped)
        return fail(CUDA_ERROR_INVALID_VALUE);
    errno = saved;
    return CUDA_SUCCESS;
}

/* Access is granted by cuMemMap already; this only validates. */
EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!ptr || size == 0 || !desc || count == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return CUDA_SUCCESS;
}

static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    }
    return 0;
}

/* An array is a heap block of width × max(height,1) × max(depth,1) × channels × element bytes;
 * its handle is the block's address. */
static CUresult array_create(CUarray *pHandle, size_t w, size_t h, size_t d, CUarray_format f, unsigned ch) {
    size_t elem = format_bytes(f);
    if (!pHandle || w == 0 || elem == 0 || (ch != 1 && ch != 2 && ch != 4))
        return fail(CUDA_ERROR_INVALID_VALUE);
    size_t bytes = w * (h ? h : 1) * (d ? d : 1) * ch * elem;
    CUdeviceptr p = 0;
    CUresult r = alloc_block(&p, bytes, BLOCK_ARRAY);
    if (r == CUDA_SUCCESS)
        *pHandle = (CUarray)(uintptr_t)p;
    return r;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!desc)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return array_create(pHandle, desc->Width, desc->Height, 0, desc->Format, desc->NumChannels);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!desc)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return array_create(pHandle, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!hArray)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return free_block((CUdeviceptr)(uintptr_t)hArray, BLOCK_ARRAY);
}

/* ---- registered host memory and IPC (issue 12) ---- */

/* Page-locks nothing: remembers the range so that a second registration or an unregistration of
 * something never registered fails as it does on a GPU. */
static CUresult host_register(void *p, size_t bytesize, unsigned int Flags) {
    (void)Flags;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!p || bytesize == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    struct block *b = table_remove((CUdeviceptr)(uintptr_t)p, BLOCK_REGISTERED);
    if (b) {
        table_insert(b->key, b->size, BLOCK_REGISTERED, 0);
        free(b);
        return fail(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    }
    if (table_insert((CUdeviceptr)(uintptr_t)p, bytesize, BLOCK_REGISTERED, 0) != 0)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    errno = saved;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) {
    return host_register(p, bytesize, Flags);
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
    return host_register(p, bytesize, Flags);
}

/* The memory stays the program's: only the registration goes. */
EXPORT CUresult cuMemHostUnregister(void *p) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    int saved = errno;
    struct block *b = p ? table_remove((CUdeviceptr)(uintptr_t)p, BLOCK_REGISTERED) : NULL;
    if (!b)
        return fail(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(b);
    errno = saved;
    return CUDA_SUCCESS;
}

/* The live block of one of `classes` (a bit per class) containing dptr: its base and size. */
static int containing_block(CUdeviceptr dptr, unsigned classes, CUdeviceptr *base, size_t *size) {
    int found = 0;
    pthread_mutex_lock(&table_lock);
    for (unsigned i = 0; i < BUCKETS && !found; i++)
        for (struct block *b = table[i]; b; b = b->next)
            if ((classes & (1u << b->cls)) && dptr >= b->key && dptr - b->key < b->size) {
                *base = b->key;
                *size = b->size;
                found = 1;
                break;
            }
    pthread_mutex_unlock(&table_lock);
    return found;
}

#define DEVICE_MEMORY ((1u << BLOCK_DEVICE) | (1u << BLOCK_IPC) | (1u << BLOCK_MAPPED))
#define SHARE_MAGIC 0x6e756c6c69706321ull /* "nullipc!" */

struct share { unsigned long long magic; CUdeviceptr base; size_t size; };

/* Writes the exporter's base and size into an opaque 64-byte share. */
static CUresult export_share(void *out, CUdeviceptr dptr) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    struct share sh = {SHARE_MAGIC, 0, 0};
    if (!out || !containing_block(dptr, 1u << BLOCK_DEVICE, &sh.base, &sh.size))
        return fail(CUDA_ERROR_INVALID_VALUE);
    memset(out, 0, 64);
    memcpy(out, &sh, sizeof sh);
    return CUDA_SUCCESS;
}

/* "Opens" a share: one process has one address space, so the opener gets a fresh block of the
 * exporter's size (class `cls`), as another process would get its own mapping. */
static CUresult open_share(CUdeviceptr *out, const void *share, enum block_class cls) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    struct share sh;
    memcpy(&sh, share, sizeof sh);
    if (!out || sh.magic != SHARE_MAGIC || sh.size == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return alloc_block(out, sh.size, cls);
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    return export_share(pHandle, dptr);
}

EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
    (void)Flags;
    return open_share(pdptr, &handle, BLOCK_IPC);
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
    (void)Flags;
    return open_share(pdptr, &handle, BLOCK_IPC);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    if (!dptr)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return free_block(dptr, BLOCK_IPC);
}

EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr) {
    return export_share(shareData_out, ptr);
}

/* An imported pointer is freed with cuMemFree/cuMemFreeAsync: it is a device block. */
EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData) {
    if (!pool || !shareData)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return open_share(ptr_out, shareData, BLOCK_DEVICE);
}

EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!containing_block(dptr, DEVICE_MEMORY, &base, &size))
        return fail(CUDA_ERROR_NOT_FOUND);
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* ---- copies and sets: all memory is host memory; ranges are checked against live blocks ---- */

static CUresult checked_copy(void *dst, const void *src, size_t n, int check_dst, int check_src) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (n == 0)
        return CUDA_SUCCESS;
    if ((check_dst && !range_is_live((CUdeviceptr)(uintptr_t)dst, n)) ||
        (check_src && !range_is_live((CUdeviceptr)(uintptr_t)src, n)))
        return fail(CUDA_ERROR_INVALID_VALUE);
    memmove(dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return checked_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes, 0, 0);
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    return checked_copy((void *)(uintptr_t)dst, src, bytes, 1, 0);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    return checked_copy(dst, (const void *)(uintptr_t)src, bytes, 0, 1);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return checked_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes, 1, 1);
}

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (n && !range_is_live(dst, n))
        return fail(CUDA_ERROR_INVALID_VALUE);
    memset((void *)(uintptr_t)dst, value, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (n && !range_is_live(dst, n * 4))
        return fail(CUDA_ERROR_INVALID_VALUE);
    unsigned int *p = (unsigned int *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++)
        p[i] = value;
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress: base name + cudaVersion + flags ---- */

struct proc {
    const char *name;  /* base name, as callers ask for it */
    int version;       /* the CUDA version that introduced this ABI */
    void *fn;
    void *fn_ptsz;     /* per-thread-default-stream variant, if any */
};

#define P(name, version, fn) {name, version, (void *)(fn), NULL}
#define PT(name, version, fn) {name, version, (void *)(fn), (void *)(fn##_ptsz)}

static const struct proc procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    P("cuStreamSynchronize", 2000, cuStreamSynchronize),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuMemAlloc", 2000, cuMemAlloc),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAlloc", 99000, cuMemAlloc_v3),
    P("cuMemFree", 2000, cuMemFree),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemHostRegister", 4000, cuMemHostRegister),
    P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    P("cuMemHostUnregister", 4000, cuMemHostUnregister),
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    P("cuMemPoolExportPointer", 11020, cuMemPoolExportPointer),
    P("cuMemPoolImportPointer", 11020, cuMemPoolImportPointer),
    P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMemcpy", 4000, cuMemcpy),
    P("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    P("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    P("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    P("cuMemsetD8", 3020, cuMemsetD8_v2),
    P("cuMemsetD32", 3020, cuMemsetD32_v2),
    P("cuGraphCreate", 10000, cuGraphCreate),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    P("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    P("cuGraphGetNodes", 10000, cuGraphGetNodes),
    P("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    P("cuGraphMemAllocNodeGetParams", 11040, cuGraphMemAllocNodeGetParams),
    P("cuGraphMemFreeNodeGetParams", 11040, cuGraphMemFreeNodeGetParams),
    /* Since CUDA 12 the base name cuGraphInstantiate is the WithFlags ABI. */
    P("cuGraphInstantiate", 10000, cuGraphInstantiate),
    P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    P("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    PT("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    PT("cuGraphLaunch", 10000, cuGraphLaunch),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    PT("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PT("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph),
    P("cuStreamBeginCapture", 99000, cuStreamBeginCapture_v3),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
};

/* The newest ABI of `symbol` introduced at or before `cudaVersion`. */
static CUdriverProcAddressQueryResult resolve(const char *symbol, int cudaVersion, cuuint64_t flags, void **fn) {
    const struct proc *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        if (strcmp(procs[i].name, symbol) != 0)
            continue;
        known = 1;
        if (procs[i].version <= cudaVersion && (!best || procs[i].version > best->version))
            best = &procs[i];
    }
    if (!best) {
        *fn = NULL;
        return known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    *fn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->fn_ptsz ? best->fn_ptsz : best->fn;
    return CU_GET_PROC_ADDRESS_SUCCESS;
}

/* v2: a miss is reported through symbolStatus with CUDA_SUCCESS, as driver 580 does. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus) {
    if (!symbol || !pfn || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return fail(CUDA_ERROR_INVALID_VALUE);
    CUdriverProcAddressQueryResult status = resolve(symbol, cudaVersion, flags, pfn);
    if (symbolStatus)
        *symbolStatus = status;
    return CUDA_SUCCESS;
}

/* v1 has no status out-param, so a miss is CUDA_ERROR_NOT_FOUND. */
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    if (!symbol || !pfn || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (resolve(symbol, cudaVersion, flags, pfn) != CU_GET_PROC_ADDRESS_SUCCESS) {
        errno = EINVAL;
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

/* ---- CUDA graphs: memory nodes, launch, stream capture ----
 * As the programming guide describes: an allocation node's address is fixed when the node is
 * made; the memory is allocated each time the graph is launched and stays allocated until a free
 * node in a graph or cuMemFree/cuMemFreeAsync frees it; a graph cannot be launched again while
 * an allocation of its previous launch is outstanding. */

#define MAX_NODES 64
struct CUgraphNode_st {
    CUgraphNodeType type;
    CUdeviceptr addr;
    size_t size;
};
struct CUgraph_st {
    size_t count;
    struct CUgraphNode_st nodes[MAX_NODES];
};
struct CUgraphExec_st {
    struct CUgraph_st graph; /* a copy: later changes to the graph do not reach the executable */
};

static struct CUgraphNode_st *add_node(CUgraph g, CUgraphNodeType type, CUdeviceptr addr, size_t size) {
    if (!g || g->count == MAX_NODES)
        return NULL;
    struct CUgraphNode_st *n = &g->nodes[g->count++];
    n->type = type;
    n->addr = addr;
    n->size = size;
    return n;
}

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!phGraph || flags)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    *phGraph = calloc(1, sizeof **phGraph);
    errno = saved;
    return *phGraph ? CUDA_SUCCESS : fail(CUDA_ERROR_OUT_OF_MEMORY);
}

EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
    if (!hGraph)
        return fail(CUDA_ERROR_INVALID_VALUE);
    free(hGraph); /* node addresses stay reserved: an executable may still launch them */
    return CUDA_SUCCESS;
}

/* A new node address: heap memory the node owns for the life of the process. */
static CUresult node_address(CUdeviceptr *out, size_t size) {
    pthread_once(&config_once, read_config);
    if (size == 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (size > mem_limit)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    int saved = errno;
    void *p = heap_alloc(size);
    errno = saved;
    if (!p)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
    (void)dependencies;
    (void)numDependencies;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!phGraphNode || !hGraph || !nodeParams)
        return fail(CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr addr = 0;
    CUresult r = node_address(&addr, nodeParams->bytesize);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUgraphNode_st *n = add_node(hGraph, CU_GRAPH_NODE_TYPE_MEM_ALLOC, addr, nodeParams->bytesize);
    if (!n)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    nodeParams->dptr = addr;
    *phGraphNode = n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, CUdeviceptr dptr) {
    (void)dependencies;
    (void)numDependencies;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!phGraphNode || !hGraph || !dptr)
        return fail(CUDA_ERROR_INVALID_VALUE);
    struct CUgraphNode_st *n = add_node(hGraph, CU_GRAPH_NODE_TYPE_MEM_FREE, dptr, 0);
    if (!n)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    *phGraphNode = n;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
    if (!hGraph || !numNodes)
        return fail(CUDA_ERROR_INVALID_VALUE);
    if (nodes) {
        size_t n = *numNodes < hGraph->count ? *numNodes : hGraph->count;
        for (size_t i = 0; i < n; i++)
            nodes[i] = &hGraph->nodes[i];
        *numNodes = n;
    } else {
        *numNodes = hGraph->count;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
    if (!hNode || !type)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *type = hNode->type;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out) {
    if (!hNode || !params_out || hNode->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return fail(CUDA_ERROR_INVALID_VALUE);
    memset(params_out, 0, sizeof *params_out);
    params_out->bytesize = hNode->size;
    params_out->dptr = hNode->addr;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out) {
    if (!hNode || !dptr_out || hNode->type != CU_GRAPH_NODE_TYPE_MEM_FREE)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *dptr_out = hNode->addr;
    return CUDA_SUCCESS;
}

/* Every instantiation form ends here, never in another exported form: an exported function
 * called by name from inside this library would be the shim's hook of it (LD_PRELOAD), which the
 * real driver never calls. */
static CUresult instantiate_exec(CUgraphExec *phGraphExec, CUgraph hGraph) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!phGraphExec || !hGraph)
        return fail(CUDA_ERROR_INVALID_VALUE);
    int saved = errno;
    struct CUgraphExec_st *e = malloc(sizeof *e);
    errno = saved;
    if (!e)
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    e->graph = *hGraph;
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
    (void)flags;
    return instantiate_exec(phGraphExec, hGraph);
}

static CUresult instantiate_with_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
    CUresult r = instantiate_exec(phGraphExec, hGraph);
    if (instantiateParams)
        instantiateParams->result_out = r == CUDA_SUCCESS ? 0 : 1;
    return r;
}

EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}

EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}

/* The CUDA 10 and 11 forms: an error node and a log buffer instead of flags. */
static CUresult instantiate_legacy(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                   char *logBuffer, size_t bufferSize) {
    CUresult r = instantiate_exec(phGraphExec, hGraph);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return r;
}

EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize) {
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                   char *logBuffer, size_t bufferSize) {
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static int key_is_live(CUdeviceptr key) {
    int live = 0;
    pthread_mutex_lock(&table_lock);
    for (struct block *b = table[bucket_of(key)]; b; b = b->next)
        live |= b->key == key && b->cls == BLOCK_DEVICE;
    pthread_mutex_unlock(&table_lock);
    return live;
}

static CUresult graph_launch(CUgraphExec e) {
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!e)
        return fail(CUDA_ERROR_INVALID_VALUE);
    struct CUgraph_st *g = &e->graph;
    for (size_t i = 0; i < g->count; i++) /* the previous launch's allocations must be freed */
        if (g->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && key_is_live(g->nodes[i].addr))
            return fail(CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < g->count; i++) {
        struct CUgraphNode_st *n = &g->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            int saved = errno;
            if (table_insert(n->addr, n->size, BLOCK_DEVICE, GRAPH_OWNED) != 0)
                return fail(CUDA_ERROR_OUT_OF_MEMORY);
            errno = saved;
        } else if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            CUresult r = free_block(n->addr, BLOCK_DEVICE);
            if (r != CUDA_SUCCESS)
                return r;
        }
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    (void)hStream;
    return graph_launch(hGraphExec);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    (void)hStream;
    return graph_launch(hGraphExec);
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    if (!hGraphExec)
        return fail(CUDA_ERROR_INVALID_VALUE);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* Stream capture: at most a few streams at once, each recording into its own graph. */
#define MAX_CAPTURES 8
static struct {
    CUstream stream;
    CUgraph graph;
} captures[MAX_CAPTURES];
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

static struct CUgraph_st *capturing_graph(CUstream stream) {
    CUgraph g = NULL;
    pthread_mutex_lock(&capture_lock);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i].graph && captures[i].stream == stream)
            g = captures[i].graph;
    pthread_mutex_unlock(&capture_lock);
    return g;
}

static CUresult capture_alloc(CUstream stream, CUdeviceptr *dptr, size_t size) {
    if (!dptr)
        return fail(CUDA_ERROR_INVALID_VALUE);
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.bytesize = size;
    CUgraphNode node;
    CUresult r = cuGraphAddMemAllocNode(&node, capturing_graph(stream), NULL, 0, &params);
    if (r == CUDA_SUCCESS)
        *dptr = params.dptr;
    return r;
}

static CUresult capture_free(CUstream stream, CUdeviceptr dptr) {
    CUgraphNode node;
    return cuGraphAddMemFreeNode(&node, capturing_graph(stream), NULL, 0, dptr);
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode) {
    (void)mode;
    if (!is_initialized())
        return fail(CUDA_ERROR_NOT_INITIALIZED);
    if (!hStream || capturing_graph(hStream))
        return fail(CUDA_ERROR_INVALID_VALUE); /* the legacy default stream cannot be captured */
    CUgraph g;
    CUresult r = cuGraphCreate(&g, 0);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&capture_lock);
    int slot = -1;
    for (int i = 0; i < MAX_CAPTURES && slot < 0; i++)
        if (!captures[i].graph)
            slot = i;
    if (slot >= 0) {
        captures[slot].stream = hStream;
        captures[slot].graph = g;
    }
    pthread_mutex_unlock(&capture_lock);
    if (slot < 0) {
        free(g);
        return fail(CUDA_ERROR_OUT_OF_MEMORY);
    }
    return CUDA_SUCCESS;
}

/* CUDA 10.0's form: global mode. */
EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
    return cuStreamBeginCapture_v2(hStream, 0);
}

EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
    return cuStreamBeginCapture_v2(hStream, 0);
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode) {
    return cuStreamBeginCapture_v2(hStream, mode);
}

/* Not a real driver function: a form of cuStreamBeginCapture a driver newer than every runtime and
 * shim might add, handed out for cudaVersion 99000 and above, as cuMemAlloc_v3 is. */
EXPORT CUresult cuStreamBeginCapture_v3(CUstream hStream, int mode, unsigned int flags) {
    if (flags != 0)
        return fail(CUDA_ERROR_INVALID_VALUE);
    return cuStreamBeginCapture_v2(hStream, mode);
}

/* Capture into an existing graph (12.3): not simulated. */
EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                            const void *dependencyData, size_t numDependencies, int mode) {
    (void)hStream, (void)hGraph, (void)dependencies, (void)dependencyData, (void)numDependencies, (void)mode;
    return fail(CUDA_ERROR_NOT_SUPPORTED);
}

EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const void *dependencies,
                                                 const void *dependencyData, size_t numDependencies, int mode) {
    return cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData, numDependencies, mode);
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
    return cuStreamEndCapture(hStream, phGraph);
}

EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
    if (!phGraph)
        return fail(CUDA_ERROR_INVALID_VALUE);
    CUgraph g = NULL;
    pthread_mutex_lock(&capture_lock);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i].graph && captures[i].stream == hStream) {
            g = captures[i].graph;
            captures[i].graph = NULL;
        }
    pthread_mutex_unlock(&capture_lock);
    if (!g)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *phGraph = g;
    return CUDA_SUCCESS;
}

/* cuStreamIsCapturing calls made, printed at exit on stderr when NULLCUDA_REPORT_CAPTURE_QUERIES is
 * set ("nullcuda: capture queries N"): the shim asks only while a capture may be under way. */
static unsigned long capture_queries;

__attribute__((destructor)) static void report_capture_queries(void) {
    if (getenv("NULLCUDA_REPORT_CAPTURE_QUERIES"))
        fprintf(stderr, "nullcuda: capture queries %lu\n", __atomic_load_n(&capture_queries, __ATOMIC_RELAXED));
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
    __atomic_add_fetch(&capture_queries, 1, __ATOMIC_RELAXED);
    if (!captureStatus)
        return fail(CUDA_ERROR_INVALID_VALUE);
    *captureStatus = capturing_graph(hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
    return cuStreamIsCapturing(hStream, captureStatus);
}
