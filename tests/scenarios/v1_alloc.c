/* v1_alloc: the CUDA 2.x cuMemAlloc (32-bit pointers, cudaVersion 2000) must reach the driver
 * untouched: the shim records it nowhere, yet it works. Freeing such a block with
 * cuMemFree_v2 succeeds for an address the shim never saw: one untracked free. One ordinary
 * cuMemAlloc_v2 block stays live so the dump is not empty.
 * build: -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

SITE void alloc_tracked(PFN_cuMemAlloc alloc) {
    CUdeviceptr d = 0;
    CHECK(alloc(&d, 100)); // @tracked
    KEEP(d);
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return 97;
    PFN_cuGetProcAddress_v2 gpa = (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    if (!gpa)
        return 96;
    CUdriverProcAddressQueryResult st;
    void *fn = NULL;
    CHECK(gpa("cuInit", &fn, 2000, 0, &st));
    CHECK(((PFN_cuInit)fn)(0));

    PFN_cuMemAlloc_v1 alloc_v1 = NULL;
    CHECK(gpa("cuMemAlloc", (void **)&alloc_v1, 2000, 0, &st));
    PFN_cuMemAlloc_v1 alloc_v1_by_name = (PFN_cuMemAlloc_v1)dlsym(h, "cuMemAlloc");
    PFN_cuMemFree free_v2 = NULL;
    CHECK(gpa("cuMemFree", (void **)&free_v2, 3020, 0, &st));
    PFN_cuMemAlloc alloc_v2 = NULL;
    CHECK(gpa("cuMemAlloc", (void **)&alloc_v2, 3020, 0, &st));
    if (!alloc_v1 || !alloc_v1_by_name || !free_v2 || !alloc_v2)
        return 95;

    CUdeviceptr_v1 a = 0, b = 0;
    CHECK(alloc_v1(&a, 4096));
    memset((void *)(uintptr_t)a, 0x5a, 4096); /* it really is memory */
    CHECK(alloc_v1_by_name(&b, 8192));
    printf("v1 blocks below 4 GiB: %d\n", a != 0 && b != 0);
    int rc = free_v2((CUdeviceptr)a);
    printf("cuMemFree_v2 of a v1 block: rc=%d\n", rc);
    alloc_tracked(alloc_v2);
    return 0;
}
