/* cudnn.c: a stand-in for libcudnn.so.9. cudnnCreate makes a handle that owns two blocks from
 * cuMemAlloc_v2 (48 KiB and 1 KiB), called from internal functions that have no symbol (the
 * library is linked stripped: only the exported API names resolve); cudnnDestroy frees exactly
 * those two blocks (cuMemFree_v2) and the handle.
 * Must never: free anything but in cudnnDestroy. */
#include "library.h"

#include <stdlib.h>

struct handle {
    CUdeviceptr workspace, constants;
};

INTERNAL static int release_handle(struct handle *h) {
    int rc = release(&h->workspace);
    int rc2 = release(&h->constants);
    KEEP(h);
    return rc != 0 ? rc : rc2;
}

INTERNAL static int init_handle(struct handle *h) {
    int rc = reserve(&h->workspace, 48 << 10);
    if (rc == 0)
        rc = reserve(&h->constants, 1 << 10);
    KEEP(h);
    return rc;
}

EXPORT int cudnnCreate(void **out) {
    if (!out)
        return 3; /* CUDNN_STATUS_BAD_PARAM */
    struct handle *h = calloc(1, sizeof *h);
    if (!h)
        return 2; /* CUDNN_STATUS_ALLOC_FAILED */
    if (init_handle(h) != 0) {
        release_handle(h);
        free(h);
        return 2;
    }
    *out = h;
    KEEP(out);
    return 0;
}

EXPORT int cudnnDestroy(void *handle) {
    struct handle *h = handle;
    if (!h)
        return 1; /* CUDNN_STATUS_NOT_INITIALIZED */
    int rc = release_handle(h);
    free(h);
    return rc;
}
