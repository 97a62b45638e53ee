/* unknown_form: a runtime newer than the shim asks cuGetProcAddress for cuMemAlloc at a CUDA
 * version where the driver hands out a form the shim has no hook for (the null driver's
 * cuMemAlloc_v3, another argument list, at cudaVersion 99000). The shim must not stand its
 * cuMemAlloc_v2 hook in for it (the arguments differ): the call reaches the driver and works,
 * unrecorded, and the shim says so once on stderr. The same base name asked at 13000 is hooked
 * and recorded as ever.
 * build: -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>

typedef CUresult (*PFN_cuMemAlloc_v3)(CUdeviceptr *, size_t, unsigned int);

SITE void alloc_known(PFN_cuMemAlloc alloc) {
    CUdeviceptr d = 0;
    CHECK(alloc(&d, 4000)); // @known
    KEEP(d);
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v2 gpa = h ? (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 96;
    CUdriverProcAddressQueryResult st;
    PFN_cuInit init = NULL;
    CHECK(gpa("cuInit", (void **)&init, 99000, 0, &st));
    CHECK(init(0));
    PFN_cuMemAlloc_v3 alloc_v3 = NULL;
    PFN_cuMemAlloc alloc_v2 = NULL;
    /* Twice: the warning is said once. */
    CHECK(gpa("cuMemAlloc", (void **)&alloc_v3, 99000, 0, &st));
    CHECK(gpa("cuMemAlloc", (void **)&alloc_v3, 99000, 0, &st));
    CHECK(gpa("cuMemAlloc", (void **)&alloc_v2, 13000, 0, &st));
    if (!alloc_v3 || !alloc_v2)
        return 95;
    printf("handed out the driver's own cuMemAlloc_v3: %d\n", alloc_v3 == dlsym(h, "cuMemAlloc_v3"));
    CUdeviceptr d = 0;
    CHECK(alloc_v3(&d, 9000, 0));
    memset((void *)(uintptr_t)d, 0x5a, 9000); /* it really is memory */
    KEEP(d);
    alloc_known(alloc_v2);
    return 0;
}
