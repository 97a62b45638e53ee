/* cusolver.c: a stand-in for libcusolver.so.12, linked against the libcublas.so.13 stand-in.
 * cusolverDnCreate makes a handle that owns a cuBLAS handle (a nested create: it calls the
 * exported cublasCreate_v2 of libcublas, which allocates 1 MiB + 4 KiB) and 32 KiB of its own
 * from cuMemAlloc_v2, called from an internal function that has no symbol (the library is
 * linked stripped). cusolverDnDestroy calls cublasDestroy_v2 and frees exactly its own block.
 * Must never: free anything but in cusolverDnDestroy. */
#include "library.h"

#include <stdlib.h>

int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);

struct handle {
    void *cublas;
    CUdeviceptr workspace;
};

EXPORT int cusolverDnCreate(void **out) {
    if (!out)
        return 3; /* CUSOLVER_STATUS_INVALID_VALUE */
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return 2; /* CUSOLVER_STATUS_ALLOC_FAILED */
    if (cublasCreate_v2(&h->cublas) != 0) {
        if (h->cublas)
            cublasDestroy_v2(h->cublas);
        free(h);
        return 7; /* CUSOLVER_STATUS_INTERNAL_ERROR */
    }
    if (reserve(&h->workspace, 32 << 10) != 0) {
        cublasDestroy_v2(h->cublas);
        free(h);
        return 2;
    }
    *out = h;
    KEEP(out);
    return 0;
}

EXPORT int cusolverDnDestroy(void *handle) {
    struct handle *h = handle;
    if (!h)
        return 1; /* CUSOLVER_STATUS_NOT_INITIALIZED */
    int rc = cublasDestroy_v2(h->cublas) != 0 ? 7 : 0;
    int rc2 = release(&h->workspace);
    free(h);
    return rc != 0 ? rc : rc2;
}
