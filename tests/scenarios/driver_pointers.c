/* driver_pointers: a program that reaches the driver without linking it, the way a static
 * cudart (nvcc's default) or a framework does, then calls every wrapped allocation function
 * through the pointers it got. The route is argv[1]:
 *   getproc   dlopen + dlsym("cuGetProcAddress_v2") + base-name lookups (CUDA 12/13 cudart)
 *   getproc1  the same, but through the v1 cuGetProcAddress from ("cuGetProcAddress", 11030)
 *   cuda11    dlsym("cuGetProcAddress") (v1, as CUDA 11.3-11.8 runtimes bind it) + lookups
 *   deepbind  like getproc, with libcuda.so.1 opened RTLD_DEEPBIND (bypasses interposed symbols)
 *   dlsym     one dlsym per versioned ELF name (old runtimes; drivers without cuGetProcAddress)
 * argv[2] is `leak` (all 12 stay live) or `free`.
 * build: -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>

static struct {
    PFN_cuInit init;
    PFN_cuMemAlloc memAlloc;
    PFN_cuMemAllocPitch memAllocPitch;
    PFN_cuMemFree memFree;
    PFN_cuMemAllocManaged memAllocManaged;
    PFN_cuMemAllocHost memAllocHost;
    PFN_cuMemHostAlloc memHostAlloc;
    PFN_cuMemFreeHost memFreeHost;
    PFN_cuMemAllocAsync memAllocAsync, memAllocAsync_ptsz;
    PFN_cuMemFreeAsync memFreeAsync, memFreeAsync_ptsz;
    PFN_cuMemAllocFromPoolAsync memAllocFromPoolAsync, memAllocFromPoolAsync_ptsz;
    PFN_cuMemCreate memCreate;
    PFN_cuMemRelease memRelease;
    PFN_cuArrayCreate arrayCreate;
    PFN_cuArray3DCreate array3DCreate;
    PFN_cuArrayDestroy arrayDestroy;
    PFN_cuDeviceGetDefaultMemPool deviceGetDefaultMemPool;
} cu;

static void *handle;
static PFN_cuGetProcAddress_v2 gpa2;
static PFN_cuGetProcAddress_v1 gpa1;
static const char *route;

/* Resolves one function by base name, version and flags, or by ELF name on the dlsym route. */
static void *get(const char *base, const char *elf, int version, cuuint64_t flags) {
    void *fn = NULL;
    if (strcmp(route, "dlsym") == 0) {
        fn = dlsym(handle, elf);
    } else if (strcmp(route, "getproc1") == 0 || strcmp(route, "cuda11") == 0) {
        CHECK(gpa1(base, &fn, version, flags));
    } else {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CHECK(gpa2(base, &fn, version, flags, &status));
        CHECK(status);
    }
    if (!fn) {
        fprintf(stderr, "no %s\n", elf);
        exit(98);
    }
    return fn;
}

static void bind(void) {
    int deepbind = strcmp(route, "deepbind") == 0;
    handle = dlopen("libcuda.so.1", deepbind ? RTLD_NOW | RTLD_DEEPBIND : RTLD_NOW);
    if (!handle) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(97);
    }
    if (strcmp(route, "cuda11") == 0) {
        gpa1 = (PFN_cuGetProcAddress_v1)dlsym(handle, "cuGetProcAddress");
        if (!gpa1)
            exit(96);
    } else if (strcmp(route, "dlsym") != 0) {
        CUdriverProcAddressQueryResult status;
        void *fn = NULL;
        gpa2 = (PFN_cuGetProcAddress_v2)dlsym(handle, "cuGetProcAddress_v2");
        if (!gpa2)
            exit(96);
        CHECK(gpa2("cuGetProcAddress", &fn, 12000, 0, &status));
        gpa2 = (PFN_cuGetProcAddress_v2)fn;
        CHECK(gpa2("cuGetProcAddress", &fn, 11030, 0, &status));
        gpa1 = (PFN_cuGetProcAddress_v1)fn;
    }
    const cuuint64_t PTDS = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    cu.init = (PFN_cuInit)get("cuInit", "cuInit", 2000, 0);
    cu.memAlloc = (PFN_cuMemAlloc)get("cuMemAlloc", "cuMemAlloc_v2", 3020, 0);
    cu.memAllocPitch = (PFN_cuMemAllocPitch)get("cuMemAllocPitch", "cuMemAllocPitch_v2", 3020, 0);
    cu.memFree = (PFN_cuMemFree)get("cuMemFree", "cuMemFree_v2", 3020, 0);
    cu.memAllocManaged = (PFN_cuMemAllocManaged)get("cuMemAllocManaged", "cuMemAllocManaged", 6000, 0);
    cu.memAllocHost = (PFN_cuMemAllocHost)get("cuMemAllocHost", "cuMemAllocHost_v2", 3020, 0);
    cu.memHostAlloc = (PFN_cuMemHostAlloc)get("cuMemHostAlloc", "cuMemHostAlloc", 2020, 0);
    cu.memFreeHost = (PFN_cuMemFreeHost)get("cuMemFreeHost", "cuMemFreeHost", 2000, 0);
    cu.memAllocAsync = (PFN_cuMemAllocAsync)get("cuMemAllocAsync", "cuMemAllocAsync", 11020, 0);
    cu.memAllocAsync_ptsz = (PFN_cuMemAllocAsync)get("cuMemAllocAsync", "cuMemAllocAsync_ptsz", 11020, PTDS);
    cu.memFreeAsync = (PFN_cuMemFreeAsync)get("cuMemFreeAsync", "cuMemFreeAsync", 11020, 0);
    cu.memFreeAsync_ptsz = (PFN_cuMemFreeAsync)get("cuMemFreeAsync", "cuMemFreeAsync_ptsz", 11020, PTDS);
    cu.memAllocFromPoolAsync =
        (PFN_cuMemAllocFromPoolAsync)get("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 0);
    cu.memAllocFromPoolAsync_ptsz =
        (PFN_cuMemAllocFromPoolAsync)get("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", 11020, PTDS);
    cu.memCreate = (PFN_cuMemCreate)get("cuMemCreate", "cuMemCreate", 10020, 0);
    cu.memRelease = (PFN_cuMemRelease)get("cuMemRelease", "cuMemRelease", 10020, 0);
    cu.arrayCreate = (PFN_cuArrayCreate)get("cuArrayCreate", "cuArrayCreate_v2", 3020, 0);
    cu.array3DCreate = (PFN_cuArray3DCreate)get("cuArray3DCreate", "cuArray3DCreate_v2", 3020, 0);
    cu.arrayDestroy = (PFN_cuArrayDestroy)get("cuArrayDestroy", "cuArrayDestroy", 2000, 0);
    cu.deviceGetDefaultMemPool =
        (PFN_cuDeviceGetDefaultMemPool)get("cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, 0);
}

static CUdeviceptr dev, pitched, managed, async1, async2, pool1, pool2;
static void *host, *host2;
static CUmemGenericAllocationHandle phys;
static CUarray arr2d, arr3d;
static size_t pitch;
static CUmemoryPool pool;

SITE void alloc_cuMemAlloc_v2(void) {
    CHECK(cu.memAlloc(&dev, 1100)); // @cuMemAlloc_v2
    KEEP(dev);
}
SITE void alloc_cuMemAllocPitch_v2(void) {
    CHECK(cu.memAllocPitch(&pitched, &pitch, 300, 7, 4)); // @cuMemAllocPitch_v2
    KEEP(pitched);
}
SITE void alloc_cuMemAllocManaged(void) {
    CHECK(cu.memAllocManaged(&managed, 2100, CU_MEM_ATTACH_GLOBAL)); // @cuMemAllocManaged
    KEEP(managed);
}
SITE void alloc_cuMemAllocHost_v2(void) {
    CHECK(cu.memAllocHost(&host, 3100)); // @cuMemAllocHost_v2
    KEEP(host);
}
SITE void alloc_cuMemHostAlloc(void) {
    CHECK(cu.memHostAlloc(&host2, 4100, CU_MEMHOSTALLOC_PORTABLE)); // @cuMemHostAlloc
    KEEP(host2);
}
SITE void alloc_cuMemAllocAsync(void) {
    CHECK(cu.memAllocAsync(&async1, 5100, NULL)); // @cuMemAllocAsync
    KEEP(async1);
}
SITE void alloc_cuMemAllocAsync_ptsz(void) {
    CHECK(cu.memAllocAsync_ptsz(&async2, 5200, NULL)); // @cuMemAllocAsync_ptsz
    KEEP(async2);
}
SITE void alloc_cuMemAllocFromPoolAsync(void) {
    CHECK(cu.memAllocFromPoolAsync(&pool1, 6100, pool, NULL)); // @cuMemAllocFromPoolAsync
    KEEP(pool1);
}
SITE void alloc_cuMemAllocFromPoolAsync_ptsz(void) {
    CHECK(cu.memAllocFromPoolAsync_ptsz(&pool2, 6200, pool, NULL)); // @cuMemAllocFromPoolAsync_ptsz
    KEEP(pool2);
}
SITE void alloc_cuMemCreate(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    CHECK(cu.memCreate(&phys, 2097152, &prop, 0)); // @cuMemCreate
    KEEP(phys);
}
SITE void alloc_cuArrayCreate_v2(void) {
    CUDA_ARRAY_DESCRIPTOR d = {32, 8, CU_AD_FORMAT_FLOAT, 1};
    CHECK(cu.arrayCreate(&arr2d, &d)); // @cuArrayCreate_v2
    KEEP(arr2d);
}
SITE void alloc_cuArray3DCreate_v2(void) {
    CUDA_ARRAY3D_DESCRIPTOR d = {16, 4, 2, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0};
    CHECK(cu.array3DCreate(&arr3d, &d)); // @cuArray3DCreate_v2
    KEEP(arr3d);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: driver_pointers getproc|getproc1|cuda11|deepbind|dlsym leak|free\n");
        return 2;
    }
    route = argv[1];
    int do_free = strcmp(argv[2], "free") == 0;
    bind();
    CHECK(cu.init(0));
    CHECK(cu.deviceGetDefaultMemPool(&pool, 0));
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
    printf("route=%s pitch=%zu\n", route, pitch);
    if (do_free) {
        CHECK(cu.memFree(dev));
        CHECK(cu.memFree(pitched));
        CHECK(cu.memFree(managed));
        CHECK(cu.memFreeHost(host));
        CHECK(cu.memFreeHost(host2));
        CHECK(cu.memFreeAsync(async1, NULL));
        CHECK(cu.memFreeAsync_ptsz(async2, NULL));
        CHECK(cu.memFreeAsync(pool1, NULL));
        CHECK(cu.memFreeAsync_ptsz(pool2, NULL));
        CHECK(cu.memRelease(phys));
        CHECK(cu.arrayDestroy(arr2d));
        CHECK(cu.arrayDestroy(arr3d));
        printf("freed 12\n");
    } else {
        printf("leaked 12\n");
    }
    return 0;
}
