/* library.h: what the stand-ins of NVIDIA's libraries here share. Each is its own stripped
 * shared library: EXPORT marks its API (the only names that resolve), INTERNAL its helpers,
 * which call the driver from frames without a symbol, as the real libraries do. */
#ifndef CUDALEAK_FRAMEWORKS_LIBRARY_H
#define CUDALEAK_FRAMEWORKS_LIBRARY_H

#include "nullcuda.h"

#define EXPORT __attribute__((visibility("default")))
#define INTERNAL __attribute__((noinline))
/* Keeps a call from being the function's last act, so it is never turned into a tail call. */
#define KEEP(p) __asm__ volatile("" ::"g"(p) : "memory")

/* n bytes of device memory into *p, from the library's own (unnamed) frame. */
INTERNAL __attribute__((unused)) static int reserve(CUdeviceptr *p, size_t n) {
    int rc = (int)cuMemAlloc_v2(p, n);
    KEEP(p);
    return rc;
}

/* Frees *p if set, and clears it once freed. */
INTERNAL __attribute__((unused)) static int release(CUdeviceptr *p) {
    int rc = *p ? (int)cuMemFree_v2(*p) : 0;
    if (rc == 0)
        *p = 0;
    KEEP(p);
    return rc;
}

#endif
