/* nullcuda_rules: checks the null driver itself (run without the shim): cuGetProcAddress
 * resolution by the rules measured on driver 580, pointer identity with the exported ELF
 * symbols, rejection of invalid and double frees, the size limit (the test sets
 * NULLCUDA_MEM_LIMIT=1048576), and a thread-safe table. Prints one line per failed check and
 * exits 1 if any failed.
 * build: -lcuda -ldl -lpthread */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

static int failures, checks;

#define EXPECT(cond)                                                                             \
    do {                                                                                         \
        checks++;                                                                                \
        if (!(cond)) {                                                                           \
            failures++;                                                                          \
            printf("FAILED line %d: %s\n", __LINE__, #cond);                                     \
        }                                                                                        \
    } while (0)

static void *h;
static PFN_cuGetProcAddress_v2 gpa2;

static void *sym(const char *name) { return dlsym(h, name); }

/* The pointer cuGetProcAddress_v2 returns, or (void *)1 when the call itself failed. */
static void *lookup(const char *name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *st) {
    void *fn = (void *)2;
    CUresult r = gpa2(name, &fn, version, flags, st);
    return r == CUDA_SUCCESS ? fn : (void *)1;
}

static void resolution(void) {
    CUdriverProcAddressQueryResult st = 99;
    EXPECT(lookup("cuMemAlloc", 3020, 0, &st) == sym("cuMemAlloc_v2") && st == 0);
    EXPECT(lookup("cuMemAlloc", 13000, 0, &st) == sym("cuMemAlloc_v2") && st == 0);
    EXPECT(lookup("cuMemAlloc", 2000, 0, &st) == sym("cuMemAlloc") && st == 0);
    EXPECT(lookup("cuMemAlloc", 3010, 0, &st) == sym("cuMemAlloc") && st == 0);
    EXPECT(lookup("cuMemAlloc_v2", 13000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT(lookup("cuMemAllocAsync_ptsz", 13000, 2, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT(lookup("cuNoSuchFunction", 13000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT(lookup("", 13000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    EXPECT(lookup("cuMemAllocAsync", 11000, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    EXPECT(lookup("cuMemFree", 3020, 0, &st) == sym("cuMemFree_v2") && st == 0);
    EXPECT(lookup("cuMemFree", 2000, 0, &st) == sym("cuMemFree") && st == 0);
    EXPECT(lookup("cuMemAllocPitch", 3020, 0, &st) == sym("cuMemAllocPitch_v2"));
    EXPECT(lookup("cuMemAllocManaged", 6000, 0, &st) == sym("cuMemAllocManaged"));
    EXPECT(lookup("cuMemAllocHost", 3020, 0, &st) == sym("cuMemAllocHost_v2"));
    EXPECT(lookup("cuMemHostAlloc", 2020, 0, &st) == sym("cuMemHostAlloc"));
    EXPECT(lookup("cuMemFreeHost", 2000, 0, &st) == sym("cuMemFreeHost"));
    EXPECT(lookup("cuMemCreate", 10020, 0, &st) == sym("cuMemCreate"));
    EXPECT(lookup("cuMemRelease", 10020, 0, &st) == sym("cuMemRelease"));
    EXPECT(lookup("cuArrayCreate", 3020, 0, &st) == sym("cuArrayCreate_v2"));
    EXPECT(lookup("cuArray3DCreate", 3020, 0, &st) == sym("cuArray3DCreate_v2"));
    EXPECT(lookup("cuArrayDestroy", 2000, 0, &st) == sym("cuArrayDestroy"));
    const char *ptsz[] = {"cuMemAllocAsync", "cuMemFreeAsync", "cuMemAllocFromPoolAsync"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s_ptsz", ptsz[i]);
        EXPECT(lookup(ptsz[i], 11020, 0, &st) == sym(ptsz[i]) && st == 0);
        EXPECT(lookup(ptsz[i], 11020, 1, &st) == sym(ptsz[i]) && st == 0);
        EXPECT(lookup(ptsz[i], 11020, 2, &st) == sym(name) && st == 0);
        EXPECT(sym(name) != NULL && sym(name) != sym(ptsz[i]));
    }
    EXPECT(lookup("cuGetProcAddress", 12000, 0, &st) == sym("cuGetProcAddress_v2"));
    EXPECT(lookup("cuGetProcAddress", 11030, 0, &st) == sym("cuGetProcAddress"));
    EXPECT(lookup("cuGetProcAddress", 11020, 0, &st) == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    EXPECT(lookup("cuInit", 2000, 0, &st) == sym("cuInit"));
    EXPECT(lookup("cuMemAlloc", 3020, 3, &st) == (void *)1); /* unknown flags: INVALID_VALUE */

    PFN_cuGetProcAddress_v1 gpa1 = (PFN_cuGetProcAddress_v1)sym("cuGetProcAddress");
    void *fn = NULL;
    EXPECT(gpa1("cuMemAlloc", &fn, 3020, 0) == CUDA_SUCCESS && fn == sym("cuMemAlloc_v2"));
    EXPECT(gpa1("cuMemAllocAsync", &fn, 11020, 2) == CUDA_SUCCESS && fn == sym("cuMemAllocAsync_ptsz"));
    EXPECT(gpa1("cuMemAlloc_v2", &fn, 13000, 0) == CUDA_ERROR_NOT_FOUND && fn == NULL);
}

static void *churn(void *arg) {
    (void)arg;
    CUdeviceptr d[100];
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 100; i++)
            if (cuMemAlloc_v2(&d[i], 64 + (size_t)i) != CUDA_SUCCESS)
                return (void *)1;
        for (int i = 0; i < 100; i++)
            if (cuMemFree_v2(d[i]) != CUDA_SUCCESS)
                return (void *)1;
    }
    return NULL;
}

static void memory(void) {
    CUdeviceptr d = 0;
    EXPECT(cuMemAlloc_v2(&d, 64) == CUDA_ERROR_NOT_INITIALIZED); /* before cuInit */
    EXPECT(cuInit(0) == CUDA_SUCCESS);
    int v = 0;
    EXPECT(cuDriverGetVersion(&v) == CUDA_SUCCESS && v == 13000);
    CUdevice dev = -1;
    EXPECT(cuCtxGetDevice(&dev) == CUDA_SUCCESS && dev == 0);

    EXPECT(cuMemAlloc_v2(&d, 1000) == CUDA_SUCCESS && d != 0 && d % 256 == 0);
    memset((void *)(uintptr_t)d, 1, 1000);
    EXPECT(cuMemFree_v2(d) == CUDA_SUCCESS);
    EXPECT(cuMemFree_v2(d) == CUDA_ERROR_INVALID_VALUE);       /* double free */
    EXPECT(cuMemFree_v2(0x1234) == CUDA_ERROR_INVALID_VALUE);  /* never allocated */
    EXPECT(cuMemFree_v2(0) == CUDA_SUCCESS);
    EXPECT(cuMemAlloc_v2(&d, 0) == CUDA_ERROR_INVALID_VALUE);
    EXPECT(cuMemAlloc_v2(&d, 1048577) == CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(cuMemAlloc_v2(&d, 1048576) == CUDA_SUCCESS && cuMemFree_v2(d) == CUDA_SUCCESS);

    void *hp = NULL;
    EXPECT(cuMemHostAlloc(&hp, 100, 0) == CUDA_SUCCESS);
    EXPECT(cuMemFree_v2((CUdeviceptr)(uintptr_t)hp) == CUDA_ERROR_INVALID_VALUE); /* wrong kind */
    EXPECT(cuMemFreeHost(hp) == CUDA_SUCCESS && cuMemFreeHost(hp) == CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr_v1 small = 0;
    EXPECT(cuMemAlloc(&small, 4096) == CUDA_SUCCESS && small != 0);
    EXPECT(cuMemFree_v2(small) == CUDA_SUCCESS && cuMemFree(small) == CUDA_ERROR_INVALID_VALUE);

    size_t pitch = 0;
    EXPECT(cuMemAllocPitch_v2(&d, &pitch, 100, 10, 4) == CUDA_SUCCESS && pitch == 512);
    EXPECT(cuMemFree_v2(d) == CUDA_SUCCESS);

    CUarray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR desc = {16, 4, 2, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0};
    EXPECT(cuArray3DCreate_v2(&a, &desc) == CUDA_SUCCESS);
    EXPECT(cuArrayDestroy(a) == CUDA_SUCCESS && cuArrayDestroy(a) == CUDA_ERROR_INVALID_VALUE);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    CUmemGenericAllocationHandle ph = 0;
    EXPECT(cuMemCreate(&ph, 4096, &prop, 0) == CUDA_SUCCESS);
    EXPECT(cuMemRelease(ph) == CUDA_SUCCESS && cuMemRelease(ph) == CUDA_ERROR_INVALID_VALUE);

    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    int thread_failures = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        thread_failures += r != NULL;
    }
    EXPECT(thread_failures == 0);
    size_t free_b = 0, total = 0;
    EXPECT(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS && total == 1048576 && free_b == total);
}

int main(void) {
    h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    gpa2 = (PFN_cuGetProcAddress_v2)sym("cuGetProcAddress_v2");
    if (!gpa2)
        return 1;
    memory();
    resolution();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
