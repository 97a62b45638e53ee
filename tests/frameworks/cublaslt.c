/* cublaslt.c: a stand-in for libcublasLt.so.13. cublasLtCreate makes a handle whose 64 KiB
 * workspace comes from cuMemAlloc_v2, called from an internal function that has no symbol (the
 * library is linked stripped: only the exported API names resolve); cublasLtDestroy frees
 * exactly that block (cuMemFree_v2) and the handle.
 * Must never: free anything but in cublasLtDestroy. */
#include "nullcuda.h"

#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
#define INTERNAL __attribute__((noinline))
/* Keeps a call from being the function's last act, so it is never turned into a tail call. */
#define KEEP(p) __asm__ volatile("" ::"g"(p) : "memory")

struct handle {
    CUdeviceptr workspace;
};

INTERNAL static int reserve(CUdeviceptr *p, size_t n) {
    int rc = (int)cuMemAlloc_v2(p, n);
    KEEP(p);
    return rc;
}

INTERNAL static int release(CUdeviceptr *p) {
    int rc = *p ? (int)cuMemFree_v2(*p) : 0;
    if (rc == 0)
        *p = 0;
    KEEP(p);
    return rc;
}

EXPORT int cublasLtCreate(void **out) {
    if (!out)
        return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return 3; /* CUBLAS_STATUS_ALLOC_FAILED */
    int rc = reserve(&h->workspace, 64 << 10);
    if (rc != 0) {
        free(h);
        return 3;
    }
    *out = h;
    KEEP(out);
    return 0;
}

EXPORT int cublasLtDestroy(void *handle) {
    struct handle *h = handle;
    if (!h)
        return 1; /* CUBLAS_STATUS_NOT_INITIALIZED */
    int rc = release(&h->workspace);
    free(h);
    return rc;
}
