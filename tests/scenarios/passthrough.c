/* passthrough: on success, errno, out-params and return codes come back exactly as the runtime
 * left them. errno is set to a marker value before each call and printed after it.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

#include <errno.h>

int main(void) {
    void *p = NULL, *q = NULL;
    size_t pitch = 0;
    CHECK(cudaFree(0));
    errno = 4242;
    int rc = cudaMalloc(&p, 4096);
    printf("cudaMalloc rc=%d errno=%d nonnull=%d\n", rc, errno, p != NULL);
    errno = 4343;
    rc = cudaMallocPitch(&q, &pitch, 1000, 3);
    printf("cudaMallocPitch rc=%d errno=%d pitch=%zu\n", rc, errno, pitch);
    errno = 4444;
    rc = cudaFree(p);
    printf("cudaFree rc=%d errno=%d\n", rc, errno);
    errno = 4545;
    rc = cudaFree(q);
    printf("cudaFree rc=%d errno=%d\n", rc, errno);
    return 0;
}
