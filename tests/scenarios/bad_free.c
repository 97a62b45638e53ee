/* bad_free: frees the driver rejects. An address never allocated (runtime and driver), and a
 * block freed twice; cudaFree(NULL) and cuMemFree_v2(0) in between count as nothing. Every
 * return code and errno is printed so the test can check they pass through unchanged.
 * build: -lcudart -lcuda */
#include "nullcuda.h"
#include "nullcudart.h"
#include "scenario.h"

#include <errno.h>

static void *block;

SITE void alloc_then_free_twice_site(void) {
    CHECK(cudaMalloc(&block, 512)); // @double_alloc
    KEEP(block);
}
SITE int free_never_allocated_runtime(void) {
    errno = 0;
    int rc = cudaFree((void *)0x1000); // @invalid_runtime
    printf("cudaFree(0x1000) rc=%d errno=%d\n", rc, errno);
    return rc;
}
SITE int free_never_allocated_driver(void) {
    errno = 0;
    int rc = cuMemFree_v2(0x2000); // @invalid_driver
    printf("cuMemFree_v2(0x2000) rc=%d errno=%d\n", rc, errno);
    return rc;
}
SITE int free_second_time(void) {
    errno = 0;
    int rc = cudaFree(block); // @double_free
    printf("second cudaFree rc=%d errno=%d\n", rc, errno);
    return rc;
}
SITE void free_nothing(void) {
    printf("cudaFree(NULL) rc=%d\n", cudaFree(NULL));
    printf("cuMemFree_v2(0) rc=%d\n", cuMemFree_v2(0));
}

int main(void) {
    CHECK(cudaFree(0));
    free_never_allocated_runtime();
    free_never_allocated_driver();
    alloc_then_free_twice_site();
    CHECK(cudaFree(block)); // @first_free
    free_second_time();
    free_nothing();
    return 0;
}
