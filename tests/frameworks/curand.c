/* curand.c: a stand-in for libcurand.so.10. curandCreateGenerator takes no device memory; the
 * first curandGenerateUniform on a generator gives it 192 KiB of state from cuMemAlloc_v2,
 * called from an internal function that has no symbol (the library is linked stripped).
 * curandDestroyGenerator frees exactly that state (cuMemFree_v2) and the generator.
 * Must never: write to or read from `out` (a device pointer in real life), or free anything but
 * in curandDestroyGenerator. */
#include "library.h"

#include <stdlib.h>

enum {
    CURAND_STATUS_SUCCESS = 0,
    CURAND_STATUS_NOT_INITIALIZED = 101,
    CURAND_STATUS_ALLOCATION_FAILED = 102,
};

struct generator {
    int rng_type;
    CUdeviceptr state;
};

INTERNAL static int init_state(struct generator *g) {
    int rc = reserve(&g->state, 192 << 10);
    KEEP(g);
    return rc;
}

EXPORT int curandCreateGenerator(void **gen, int rng_type) {
    if (!gen)
        return CURAND_STATUS_NOT_INITIALIZED;
    struct generator *g = calloc(1, sizeof *g);
    if (!g)
        return CURAND_STATUS_ALLOCATION_FAILED;
    g->rng_type = rng_type;
    *gen = g;
    return CURAND_STATUS_SUCCESS;
}

EXPORT int curandGenerateUniform(void *gen, float *out, size_t n) {
    struct generator *g = gen;
    if (!g)
        return CURAND_STATUS_NOT_INITIALIZED;
    KEEP(out);
    KEEP(n);
    if (!g->state && init_state(g) != 0)
        return CURAND_STATUS_ALLOCATION_FAILED;
    KEEP(g);
    return CURAND_STATUS_SUCCESS;
}

EXPORT int curandDestroyGenerator(void *gen) {
    struct generator *g = gen;
    if (!g)
        return CURAND_STATUS_NOT_INITIALIZED;
    int rc = release(&g->state);
    free(g);
    return rc;
}
