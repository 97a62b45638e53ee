/* dlopen_copy: a program already under the shim loads another copy of it with dlopen (as a
 * library that bundles one would), once with RTLD_LOCAL and once with RTLD_GLOBAL (the path is
 * in SHIM_COPY), allocating one block before (100 B), one between (200 B) and one after
 * (300 B), all through the driver it is linked with. Prints "loaded 2" and exits 0.
 * build: -lcuda -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>

static CUdeviceptr blocks[3];

SITE void alloc_one(int i, size_t size) {
    CHECK(cuMemAlloc_v2(&blocks[i], size)); // @alloc_one
    KEEP(blocks);
}

int main(void) {
    const char *copy = getenv("SHIM_COPY");
    if (!copy)
        return 98;
    CHECK(cuInit(0));
    alloc_one(0, 100);
    int loaded = 0;
    loaded += dlopen(copy, RTLD_NOW | RTLD_LOCAL) != NULL;
    alloc_one(1, 200);
    loaded += dlopen(copy, RTLD_NOW | RTLD_GLOBAL) != NULL;
    alloc_one(2, 300);
    printf("loaded %d\n", loaded);
    return 0;
}
