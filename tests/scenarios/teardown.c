/* teardown: allocation and free calls that fail because the driver is shutting down, made from
 * exit handlers. nullcuda_shutdown(code) makes the null driver fail every allocation and free
 * with `code`, as the real one does while it tears down.
 * - before_exit runs before the shim marks exit (it is registered after the first allocation, and
 *   exit handlers run last-registered first): a cuMemAlloc_v2 failing with 201 (a real failed
 *   allocation: exit had not begun) and one failing with 4 (teardown whatever the moment).
 * - during_exit runs after the shim marked exit (registered before the first allocation, like
 *   the CUDA runtime's own handler): cuMemAlloc_v2 failing with 201 and with 3, and a cuMemFree_v2
 *   of an address never allocated failing with 4 (teardown, not an invalid free).
 * The one block main allocates is freed. Prints "done" and exits 0.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

SITE void fail_alloc(int code) {
    nullcuda_shutdown(code);
    CUdeviceptr p = 0;
    int rc = (int)cuMemAlloc_v2(&p, 4096); // @fail_alloc
    nullcuda_shutdown(0);
    if (rc != code)
        _Exit(97);
}

SITE void fail_free(int code) {
    nullcuda_shutdown(code);
    int rc = (int)cuMemFree_v2((CUdeviceptr)0x1000); // @fail_free
    nullcuda_shutdown(0);
    if (rc != code)
        _Exit(96);
}

static void before_exit(void) {
    fail_alloc(CUDA_ERROR_INVALID_CONTEXT);
    fail_alloc(CUDA_ERROR_DEINITIALIZED);
}

static void during_exit(void) {
    fail_alloc(CUDA_ERROR_INVALID_CONTEXT);
    fail_alloc(CUDA_ERROR_NOT_INITIALIZED);
    fail_free(CUDA_ERROR_DEINITIALIZED);
}

int main(void) {
    CHECK(cuInit(0));
    atexit(during_exit);
    CUdeviceptr block = 0;
    CHECK(cuMemAlloc_v2(&block, 1024));
    atexit(before_exit);
    CHECK(cuMemFree_v2(block));
    printf("done\n");
    return 0;
}
