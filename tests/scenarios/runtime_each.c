/* runtime_each: every runtime allocation function the shim labels, once each, through a
 * program linked against libcudart.so.13 (nvcc -cudart shared style).
 * `runtime_each leak` leaves all 11 blocks live; `runtime_each free` frees each with its own
 * free function after all are allocated.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

#include <string.h>

static void *dev, *managed, *host, *host2, *pitched, *async1, *async2, *pool1, *pool2;
static cudaPitchedPtr p3d;
static cudaArray_t array;
static size_t pitch;
static cudaMemPool_t pool;

SITE void alloc_cudaMalloc(void) {
    CHECK(cudaMalloc(&dev, 1000)); // @cudaMalloc
    KEEP(dev);
}
SITE void alloc_cudaMallocManaged(void) {
    CHECK(cudaMallocManaged(&managed, 2000, cudaMemAttachGlobal)); // @cudaMallocManaged
    KEEP(managed);
}
SITE void alloc_cudaMallocHost(void) {
    CHECK(cudaMallocHost(&host, 3000)); // @cudaMallocHost
    KEEP(host);
}
SITE void alloc_cudaHostAlloc(void) {
    CHECK(cudaHostAlloc(&host2, 4000, cudaHostAllocPortable)); // @cudaHostAlloc
    KEEP(host2);
}
SITE void alloc_cudaMallocPitch(void) {
    CHECK(cudaMallocPitch(&pitched, &pitch, 100, 10)); // @cudaMallocPitch
    KEEP(pitched);
}
SITE void alloc_cudaMalloc3D(void) {
    cudaExtent e = {200, 5, 3};
    CHECK(cudaMalloc3D(&p3d, e)); // @cudaMalloc3D
    KEEP(&p3d);
}
SITE void alloc_cudaMallocAsync(void) {
    CHECK(cudaMallocAsync(&async1, 6000, NULL)); // @cudaMallocAsync
    KEEP(async1);
}
SITE void alloc_cudaMallocAsync_ptsz(void) {
    CHECK(cudaMallocAsync_ptsz(&async2, 7000, NULL)); // @cudaMallocAsync_ptsz
    KEEP(async2);
}
SITE void alloc_cudaMallocFromPoolAsync(void) {
    CHECK(cudaMallocFromPoolAsync(&pool1, 8000, pool, NULL)); // @cudaMallocFromPoolAsync
    KEEP(pool1);
}
SITE void alloc_cudaMallocFromPoolAsync_ptsz(void) {
    CHECK(cudaMallocFromPoolAsync_ptsz(&pool2, 9000, pool, NULL)); // @cudaMallocFromPoolAsync_ptsz
    KEEP(pool2);
}
SITE void alloc_cudaMallocArray(void) {
    struct cudaChannelFormatDesc d = {32, 32, 32, 32, cudaChannelFormatKindFloat};
    CHECK(cudaMallocArray(&array, &d, 64, 16, 0)); // @cudaMallocArray
    KEEP(array);
}

int main(int argc, char **argv) {
    int do_free = argc > 1 && strcmp(argv[1], "free") == 0;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    alloc_cudaMalloc();
    alloc_cudaMallocManaged();
    alloc_cudaMallocHost();
    alloc_cudaHostAlloc();
    alloc_cudaMallocPitch();
    alloc_cudaMalloc3D();
    alloc_cudaMallocAsync();
    alloc_cudaMallocAsync_ptsz();
    alloc_cudaMallocFromPoolAsync();
    alloc_cudaMallocFromPoolAsync_ptsz();
    alloc_cudaMallocArray();
    /* Managed and host memory are usable from the host. */
    memset(managed, 1, 2000);
    memset(host, 2, 3000);
    printf("pitch=%zu pitch3d=%zu\n", pitch, p3d.pitch);
    if (do_free) {
        CHECK(cudaFree(dev));
        CHECK(cudaFree(managed));
        CHECK(cudaFreeHost(host));
        CHECK(cudaFreeHost(host2));
        CHECK(cudaFree(pitched));
        CHECK(cudaFree(p3d.ptr));
        CHECK(cudaFreeAsync(async1, NULL));
        CHECK(cudaFreeAsync_ptsz(async2, NULL));
        CHECK(cudaFreeAsync(pool1, NULL));
        CHECK(cudaFreeAsync_ptsz(pool2, NULL));
        CHECK(cudaFreeArray(array));
        printf("freed 11\n");
    } else {
        printf("leaked 11\n");
    }
    return 0;
}
