/* cusparse.c: a stand-in for libcusparse.so.12. cusparseCreate makes a handle with no device
 * memory (a host struct only); cusparseDestroy frees the handle. The library is linked
 * stripped: only the exported API names resolve.
 * Must never: allocate device memory. */
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
/* Keeps a call from being the function's last act, so it is never turned into a tail call. */
#define KEEP(p) __asm__ volatile("" ::"g"(p) : "memory")

struct handle {
    int stream_set;
};

EXPORT int cusparseCreate(void **out) {
    if (!out)
        return 3; /* CUSPARSE_STATUS_INVALID_VALUE */
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return 2; /* CUSPARSE_STATUS_ALLOC_FAILED */
    *out = h;
    KEEP(out);
    return 0;
}

EXPORT int cusparseDestroy(void *handle) {
    if (!handle)
        return 1; /* CUSPARSE_STATUS_NOT_INITIALIZED */
    free(handle);
    return 0;
}
