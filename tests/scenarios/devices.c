/* devices: one cuMemAlloc_v2 and one cuMemAllocHost_v2; tests run it with the null driver
 * showing one or several devices (NULLCUDA_DEVICES) and a current device (NULLCUDA_CURRENT_DEVICE).
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

SITE void allocate(CUdeviceptr *d, void **h) {
    CHECK(cuMemAlloc_v2(d, 1234)); // @device_alloc
    CHECK(cuMemAllocHost_v2(h, 4321)); // @host_alloc
}

int main(void) {
    CHECK(cuInit(0));
    CUdeviceptr d;
    void *h;
    allocate(&d, &h);
    printf("ok\n");
    return 0;
}
