/* churn_lib.c: a library that attach_harm's dlopen loop loads and closes over and over while
 * `cudaleak attach` patches the process: it imports the driver (an import slot, under RELRO with
 * -z now), keeps the driver's function in a table of its own (a word attach's scan replaces), and
 * has 32 MiB of writable data for the scan to take its time over, so that a close lands in the
 * middle of it. */
#include "nullcuda.h"

#include <stddef.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);

/* The library's own table of driver entry points, as a runtime keeps one. */
alloc_fn churn_table[4] = {cuMemAlloc_v2, 0, 0, 0};
/* Writable data the scan walks through. */
void *churn_space[4 << 20];

__attribute__((visibility("default"))) CUresult churn_alloc(CUdeviceptr *p, size_t n) {
    churn_space[n % (4 << 20)] = p;
    return churn_table[0](p, n);
}
