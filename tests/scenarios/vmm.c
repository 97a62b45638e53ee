/* vmm: physical allocations mapped into a reserved range, the way PyTorch's expandable segments
 * and JAX grow a pool: reserve 8 MiB of address space, create two 2 MiB physical allocations,
 * map both, use the memory, then unmap and release the second. The reservation, the first
 * allocation and its mapping are left: only the allocation holds memory.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>

static CUmemGenericAllocationHandle kept, released;

SITE void create_kept(const CUmemAllocationProp *prop, size_t size) {
    CHECK(cuMemCreate(&kept, size, prop, 0)); // @vmm_kept
    KEEP(kept);
}
SITE void reserve_pool(CUdeviceptr *base, size_t size) {
    CHECK(cuMemAddressReserve(base, size, 0, 0, 0)); // @vmm_reserve
    KEEP(base);
}
SITE void map_chunk(CUdeviceptr at, size_t size, CUmemGenericAllocationHandle h) {
    CHECK(cuMemMap(at, size, 0, h, 0)); // @vmm_map
    KEEP(at);
}
SITE void create_released(const CUmemAllocationProp *prop, size_t size) {
    CHECK(cuMemCreate(&released, size, prop, 0)); // @vmm_released
    KEEP(released);
}

int main(void) {
    CHECK(cuInit(0));
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, 0));
    CUdeviceptr base = 0;
    reserve_pool(&base, 4 * gran);
    create_kept(&prop, gran);
    create_released(&prop, gran);
    map_chunk(base, gran, kept);
    map_chunk(base + gran, gran, released);
    CUmemAccessDesc access = {{1, 0}, 3};
    CHECK(cuMemSetAccess(base, 2 * gran, &access, 1));
    memset((void *)(uintptr_t)base, 0x11, 2 * gran); /* mapped memory is usable */
    CHECK(cuMemUnmap(base + gran, gran));
    CHECK(cuMemRelease(released));
    printf("granularity=%zu mapped=%d\n", gran, ((unsigned char *)(uintptr_t)base)[gran - 1]);
    return 0;
}
