/* static_runtime: what nvcc's default (static cudart) build looks like to the shim — the runtime's
 * entry functions are compiled into the program and reach the driver through cuGetProcAddress
 * pointers, so the shim records the driver call. Here `cudaMalloc` and `cudaMallocHost` are the
 * program's own functions of those names (as libcudart_static.a's are), and one block is
 * allocated by calling the driver directly. All three leak: the records must say `cudaMalloc`,
 * `cudaMallocHost` (named by the stack, as the shared runtime's are by its exports) and
 * `cuMemAlloc_v2`.
 * build: -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>

static PFN_cuMemAlloc mem_alloc;
static PFN_cuMemHostAlloc host_alloc;

int cudaMalloc(void **p, size_t size);
int cudaMallocHost(void **p, size_t size);

__attribute__((noinline)) int cudaMalloc(void **p, size_t size) {
    CUdeviceptr d = 0;
    int rc = mem_alloc(&d, size);
    *p = (void *)(uintptr_t)d;
    return rc;
}

__attribute__((noinline)) int cudaMallocHost(void **p, size_t size) {
    return host_alloc(p, size, 0);
}

static void *a, *b;
static CUdeviceptr c;

SITE void via_runtime(void) {
    CHECK(cudaMalloc(&a, 1000)); // @static_malloc
    CHECK(cudaMallocHost(&b, 2000)); // @static_host
    KEEP(a);
}

SITE void via_driver(void) {
    CHECK(mem_alloc(&c, 3000)); // @static_driver
    KEEP(c);
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v2 gpa = h ? (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 96;
    PFN_cuInit init = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(gpa("cuInit", (void **)&init, 13000, 0, &st));
    CHECK(gpa("cuMemAlloc", (void **)&mem_alloc, 13000, 0, &st));
    CHECK(gpa("cuMemHostAlloc", (void **)&host_alloc, 13000, 0, &st));
    CHECK(init(0));
    via_runtime();
    via_driver();
    return 0;
}
