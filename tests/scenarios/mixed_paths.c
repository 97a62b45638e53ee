/* mixed_paths: one allocation is one record, whichever way it came. cudaMalloc through the
 * shared runtime (labelled cudaMalloc, never also cuMemAlloc_v2), then driver calls made right
 * after runtime calls (their label must not stick): cuMemAlloc_v2 from cudaGetDriverEntryPoint
 * and from dlsym.
 * build: -lcudart -ldl */
#include "nullcuda.h"
#include "nullcudart.h"
#include "scenario.h"

#include <dlfcn.h>

static void *rt1, *rt2;
static CUdeviceptr entry, named;

SITE void via_runtime(void) {
    CHECK(cudaMalloc(&rt1, 111)); // @runtime
    KEEP(rt1);
}
SITE void via_entry_point(PFN_cuMemAlloc fn) {
    CHECK(fn(&entry, 222)); // @entry_point
    KEEP(entry);
}
SITE void via_runtime_freed(void) {
    CHECK(cudaMalloc(&rt2, 333)); // @runtime_freed
    KEEP(rt2);
}
SITE void via_dlsym(PFN_cuMemAlloc fn) {
    CHECK(fn(&named, 444)); // @dlsym
    KEEP(named);
}

int main(void) {
    CHECK(cudaFree(0));
    via_runtime();
    void *fn = NULL;
    int status = -1;
    CHECK(cudaGetDriverEntryPoint("cuMemAlloc", &fn, 0, &status));
    printf("entry point status=%d\n", status);
    via_entry_point((PFN_cuMemAlloc)fn);
    via_runtime_freed();
    CHECK(cudaFree(rt2));
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return 97;
    void *by_name = dlsym(h, "cuMemAlloc_v2");
    if (!by_name)
        return 96;
    via_dlsym((PFN_cuMemAlloc)by_name);
    printf("allocated 4, freed 1\n");
    return 0;
}
