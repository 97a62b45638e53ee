// vmm: the virtual memory management API, as PyTorch's expandable segments and JAX use it.
// argv[1] = leak | clean. Reserves 64 MiB of address space, creates two 2 MiB physical
// allocations, maps both, releases the second while it is still mapped (legal: its memory lives
// until unmapped), and uses them. `clean` unmaps, releases and frees the reservation; `leak`
// leaves the reservation, both mappings and the first physical allocation.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)r_);                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    bool leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    cudaFree(0); // the primary context
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t chunk = gran, span = 64 << 20;
    CUdeviceptr base;
    CK(cuMemAddressReserve(&base, span, 0, 0, 0)); // RESERVE-HERE
    CUmemGenericAllocationHandle a, b;
    CK(cuMemCreate(&a, chunk, &prop, 0)); // PHYSICAL-A
    CK(cuMemCreate(&b, chunk, &prop, 0)); // PHYSICAL-B
    CK(cuMemMap(base, chunk, 0, a, 0)); // MAP-A
    CK(cuMemMap(base + chunk, chunk, 0, b, 0)); // MAP-B
    CK(cuMemRelease(b)); // released while mapped
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(base, 2 * chunk, &access, 1));
    CK(cuMemsetD8(base, 7, 2 * chunk));
    CK(cuCtxSynchronize());
    if (!leak) {
        CK(cuMemUnmap(base, 2 * chunk));
        CK(cuMemRelease(a));
        CK(cuMemAddressFree(base, span));
    }
    printf("vmm: granularity %zu, %s\n", gran, leak ? "left reserved and mapped" : "clean");
    return 0;
}
