/* walk_cache: allocations from the same stack depth through call chains that differ in one
 * frame, alternating, so the shim's walk cache sees the same stack pointer every time and must
 * still tell the chains apart (it proves a stack unchanged from the return addresses in its
 * slots). Sizes say which chain each block came from:
 *   256: allocate <- near_a <- main      512: allocate <- near_b <- main
 *  1024: allocate <- middle <- far_a     2048: allocate <- middle <- far_b
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr blocks[400];
static int count;

SITE void allocate(size_t size) {
    CHECK(cuMemAlloc_v2(&blocks[count++], size)); // @walk_alloc
}

SITE void near_a(size_t size) {
    allocate(size); // @near_a
    KEEP(size);
}

SITE void near_b(size_t size) {
    allocate(size); // @near_b
    KEEP(size);
}

SITE void middle(size_t size) {
    allocate(size); // @middle
    KEEP(size);
}

SITE void far_a(size_t size) {
    middle(size); // @far_a
    KEEP(size);
}

SITE void far_b(size_t size) {
    middle(size); // @far_b
    KEEP(size);
}

typedef void (*chain)(size_t);

int main(void) {
    CHECK(cuInit(0));
    chain near[2] = {near_a, near_b};
    chain far[2] = {far_a, far_b};
    for (int i = 0; i < 100; i++) {
        near[i & 1](i & 1 ? 512 : 256); // @near_call
        far[i & 1](i & 1 ? 2048 : 1024); // @far_call
    }
    printf("%d blocks\n", count);
    return 0;
}
