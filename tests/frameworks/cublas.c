/* cublas.c: a stand-in for libcublas.so.13, as the shim sees the real one. cublasCreate_v2 makes
 * a handle whose workspace (1 MiB) and scratch (4 KiB) come from cuMemAlloc_v2, called from
 * internal functions that have no symbol (the library is linked stripped, without debug
 * information: only the exported API names resolve). cublasDestroy_v2 frees exactly those two
 * blocks (cuMemFree_v2, from an internal function) and the handle. cublasAlloc, the legacy API,
 * hands a block to its caller, who owns it.
 * Must never: free anything but in cublasDestroy_v2 (real handles live until cublasDestroy,
 * which programs rarely call). */
#include "library.h"

#include <stdint.h>
#include <stdlib.h>

struct handle {
    CUdeviceptr workspace, scratch;
};

INTERNAL static int init_handle(struct handle *h) {
    int rc = reserve(&h->workspace, 1 << 20);
    if (rc == 0)
        rc = reserve(&h->scratch, 4096);
    KEEP(h);
    return rc;
}

EXPORT int cublasCreate_v2(void **out) {
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return 3;
    int rc = init_handle(h);
    *out = h;
    KEEP(out);
    return rc;
}

/* 1 (CUBLAS_STATUS_NOT_INITIALIZED) for a null handle. */
EXPORT int cublasDestroy_v2(void *handle) {
    struct handle *h = handle;
    if (!h)
        return 1;
    int rc = release(&h->workspace);
    int rc2 = release(&h->scratch);
    if (rc == 0)
        rc = rc2;
    free(h);
    return rc;
}

EXPORT int cublasAlloc(int n, int elem_size, void **device_ptr) {
    CUdeviceptr p = 0;
    int rc = reserve(&p, (size_t)n * (size_t)elem_size);
    *device_ptr = (void *)(uintptr_t)p;
    KEEP(device_ptr);
    return rc;
}
