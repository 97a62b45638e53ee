/* deep_stack: one cuMemAlloc_v2 at the bottom of 50 nested calls, so the stack is deeper than
 * CUDALEAK_DEPTH: frames[0] is the allocating line, every frame after it is the recursive call.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr block;

SITE void allocate(void) {
    CHECK(cuMemAlloc_v2(&block, 4242)); // @deep_alloc
    KEEP(block);
}

SITE int recurse(int n) {
    if (n == 0) {
        allocate();
        return 0;
    }
    int r = recurse(n - 1); // @recurse
    KEEP(n);
    return r + 1;
}

int main(void) {
    CHECK(cuInit(0));
    printf("depth %d\n", recurse(50));
    return 0;
}
