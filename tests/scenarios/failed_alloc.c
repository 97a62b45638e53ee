/* failed_alloc: allocations over the null driver's limit (the test sets NULLCUDA_MEM_LIMIT to
 * 1 MiB) fail with out-of-memory; the program ignores the errors and carries on. The return
 * code and errno the program sees are printed, so the test can check they pass through. With the
 * argument `fail-only` no allocation succeeds.
 * build: -lcudart -lcuda */
#include "nullcuda.h"
#include "nullcudart.h"
#include "scenario.h"

#include <errno.h>
#include <string.h>

static void *ok_block;

SITE int fail_runtime(void) {
    void *p = NULL;
    errno = 0;
    int rc = cudaMalloc(&p, 1048577); // @fail_runtime
    printf("cudaMalloc rc=%d errno=%d p=%p\n", rc, errno, p);
    return rc;
}
SITE int fail_driver(void) {
    CUdeviceptr d = 0;
    errno = 0;
    int rc = cuMemAlloc_v2(&d, 2097152); // @fail_driver
    printf("cuMemAlloc_v2 rc=%d errno=%d d=%llu\n", rc, errno, d);
    return rc;
}
SITE void succeed(void) {
    CHECK(cudaMalloc(&ok_block, 4096)); // @succeed
    KEEP(ok_block);
}

int main(int argc, char **argv) {
    CHECK(cudaFree(0));
    fail_runtime();
    fail_driver();
    printf("last error=%d\n", cudaGetLastError());
    if (argc < 2 || strcmp(argv[1], "fail-only") != 0)
        succeed();
    return 0;
}
