/* cublaslt.c: a stand-in for libcublasLt.so.13. cublasLtCreate makes a handle whose 64 KiB
 * workspace comes from cuMemAlloc_v2, called from an internal function that has no symbol (the
 * library is linked stripped: only the exported API names resolve); cublasLtDestroy frees
 * exactly that block (cuMemFree_v2) and the handle.
 * Must never: free anything but in cublasLtDestroy. */
#include "library.h"

#include <stdlib.h>

struct handle {
    CUdeviceptr workspace;
};

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
