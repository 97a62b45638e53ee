/* driver_each: every wrapped driver allocation function, once each, called by its ELF name
 * from a program linked with -lcuda. `driver_each leak` leaves all 12 live; `driver_each free`
 * frees each with its own free function after all are allocated.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>

static CUdeviceptr dev, pitched, managed, async1, async2, pool1, pool2;
static void *host, *host2;
static CUmemGenericAllocationHandle phys;
static CUarray arr2d, arr3d;
static size_t pitch;
static CUmemoryPool pool;

SITE void alloc_cuMemAlloc_v2(void) {
    CHECK(cuMemAlloc_v2(&dev, 1100)); // @cuMemAlloc_v2
    KEEP(dev);
}
SITE void alloc_cuMemAllocPitch_v2(void) {
    CHECK(cuMemAllocPitch_v2(&pitched, &pitch, 300, 7, 4)); // @cuMemAllocPitch_v2
    KEEP(pitched);
}
SITE void alloc_cuMemAllocManaged(void) {
    CHECK(cuMemAllocManaged(&managed, 2100, CU_MEM_ATTACH_GLOBAL)); // @cuMemAllocManaged
    KEEP(managed);
}
SITE void alloc_cuMemAllocHost_v2(void) {
    CHECK(cuMemAllocHost_v2(&host, 3100)); // @cuMemAllocHost_v2
    KEEP(host);
}
SITE void alloc_cuMemHostAlloc(void) {
    CHECK(cuMemHostAlloc(&host2, 4100, CU_MEMHOSTALLOC_PORTABLE)); // @cuMemHostAlloc
    KEEP(host2);
}
SITE void alloc_cuMemAllocAsync(void) {
    CHECK(cuMemAllocAsync(&async1, 5100, NULL)); // @cuMemAllocAsync
    KEEP(async1);
}
SITE void alloc_cuMemAllocAsync_ptsz(void) {
    CHECK(cuMemAllocAsync_ptsz(&async2, 5200, NULL)); // @cuMemAllocAsync_ptsz
    KEEP(async2);
}
SITE void alloc_cuMemAllocFromPoolAsync(void) {
    CHECK(cuMemAllocFromPoolAsync(&pool1, 6100, pool, NULL)); // @cuMemAllocFromPoolAsync
    KEEP(pool1);
}
SITE void alloc_cuMemAllocFromPoolAsync_ptsz(void) {
    CHECK(cuMemAllocFromPoolAsync_ptsz(&pool2, 6200, pool, NULL)); // @cuMemAllocFromPoolAsync_ptsz
    KEEP(pool2);
}
SITE void alloc_cuMemCreate(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    CHECK(cuMemCreate(&phys, 2097152, &prop, 0)); // @cuMemCreate
    KEEP(phys);
}
SITE void alloc_cuArrayCreate_v2(void) {
    CUDA_ARRAY_DESCRIPTOR d = {32, 8, CU_AD_FORMAT_FLOAT, 1};
    CHECK(cuArrayCreate_v2(&arr2d, &d)); // @cuArrayCreate_v2
    KEEP(arr2d);
}
SITE void alloc_cuArray3DCreate_v2(void) {
    CUDA_ARRAY3D_DESCRIPTOR d = {16, 4, 2, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0};
    CHECK(cuArray3DCreate_v2(&arr3d, &d)); // @cuArray3DCreate_v2
    KEEP(arr3d);
}

int main(int argc, char **argv) {
    int do_free = argc > 1 && strcmp(argv[1], "free") == 0;
    CUdevice device;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuDeviceGetDefaultMemPool(&pool, device));
    alloc_cuMemAlloc_v2();
    alloc_cuMemAllocPitch_v2();
    alloc_cuMemAllocManaged();
    alloc_cuMemAllocHost_v2();
    alloc_cuMemHostAlloc();
    alloc_cuMemAllocAsync();
    alloc_cuMemAllocAsync_ptsz();
    alloc_cuMemAllocFromPoolAsync();
    alloc_cuMemAllocFromPoolAsync_ptsz();
    alloc_cuMemCreate();
    alloc_cuArrayCreate_v2();
    alloc_cuArray3DCreate_v2();
    CHECK(cuMemsetD8_v2(dev, 7, 1100));
    printf("pitch=%zu\n", pitch);
    if (do_free) {
        CHECK(cuMemFree_v2(dev));
        CHECK(cuMemFree_v2(pitched));
        CHECK(cuMemFree_v2(managed));
        CHECK(cuMemFreeHost(host));
        CHECK(cuMemFreeHost(host2));
        CHECK(cuMemFreeAsync(async1, NULL));
        CHECK(cuMemFreeAsync_ptsz(async2, NULL));
        CHECK(cuMemFreeAsync(pool1, NULL));
        CHECK(cuMemFreeAsync_ptsz(pool2, NULL));
        CHECK(cuMemRelease(phys));
        CHECK(cuArrayDestroy(arr2d));
        CHECK(cuArrayDestroy(arr3d));
        printf("freed 12\n");
    } else {
        printf("leaked 12\n");
    }
    return 0;
}
