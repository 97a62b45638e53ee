/* vmm_released: physical allocations released while still mapped (legal: the memory lives until
 * its last mapping goes), and one unmap covering two mappings. Reserve 16 MiB; create A (2 MiB)
 * and B (4 MiB); map A at base, B at base+2 MiB and again at base+6 MiB; release A and B; unmap
 * base..base+6 MiB in one call (A's mapping and B's first). `leak` leaves the reservation and
 * B's second mapping; `free` unmaps it, unmaps A's range a second time (an error), and frees
 * the reservation.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>

#define MIB ((size_t)1 << 20)

static CUdeviceptr base;
static CUmemGenericAllocationHandle a, b;

SITE void reserve(void) {
    CHECK(cuMemAddressReserve(&base, 16 * MIB, 0, 0, 0)); // @released_reserve
    KEEP(base);
}
SITE void create(CUmemGenericAllocationHandle *h, size_t size) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    CHECK(cuMemCreate(h, size, &prop, 0)); // @released_create
    KEEP(h);
}
SITE void map_a(void) {
    CHECK(cuMemMap(base, 2 * MIB, 0, a, 0)); // @released_map_a
    KEEP(base);
}
SITE void map_b(void) {
    CHECK(cuMemMap(base + 2 * MIB, 4 * MIB, 0, b, 0)); // @released_map_b
    KEEP(base);
}
SITE void map_b_again(void) {
    CHECK(cuMemMap(base + 6 * MIB, 4 * MIB, 0, b, 0)); // @released_map_b_again
    KEEP(base);
}

int main(int argc, char **argv) {
    int do_free = argc > 1 && strcmp(argv[1], "free") == 0;
    CHECK(cuInit(0));
    reserve();
    create(&a, 2 * MIB);
    create(&b, 4 * MIB);
    map_a();
    map_b();
    map_b_again();
    CHECK(cuMemRelease(a));
    CHECK(cuMemRelease(b));
    memset((void *)(uintptr_t)base, 1, 10 * MIB); /* still usable after the release */
    CHECK(cuMemUnmap(base, 6 * MIB));
    printf("unmapped 2 in one call\n");
    printf("left 1 mapping\n");
    if (do_free) {
        CHECK(cuMemUnmap(base + 6 * MIB, 4 * MIB));
        int rc = cuMemUnmap(base, 2 * MIB); // @released_second_unmap
        printf("second unmap rc=%d\n", rc);
        CHECK(cuMemAddressFree(base, 16 * MIB));
        printf("freed all\n");
    }
    return 0;
}
