/* no_runtime: a process with no CUDA runtime loaded looks up cudaMalloc and cudaFree by name.
 * Without the shim there is none; with it, the shim's forwards must answer with the runtime's
 * "initialization error" (3) and record nothing.
 * build: -ldl */
#define _GNU_SOURCE
#include "scenario.h"

#include <dlfcn.h>

typedef int (*malloc_fn)(void **, size_t);
typedef int (*free_fn)(void *);

int main(void) {
    malloc_fn m = (malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc");
    free_fn f = (free_fn)dlsym(RTLD_DEFAULT, "cudaFree");
    if (!m || !f) {
        printf("no cudaMalloc\n");
        return 0;
    }
    void *p = (void *)0x1;
    printf("cudaMalloc rc=%d p=%p\n", m(&p, 4096), p);
    printf("cudaFree rc=%d\n", f(NULL));
    return 0;
}
