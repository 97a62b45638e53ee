// tests/gpu/mallocasync_log.c: an LD_PRELOAD interposer that logs every cudaMallocAsync that
// returns an error, without cudaleak: does the runtime itself tell the program 201? Build and run:
//   gcc -shared -fPIC -o /tmp/mlog.so tests/gpu/mallocasync_log.c -ldl
//   PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync LD_PRELOAD=/tmp/mlog.so python3
//       tests/gpu/frameworks/torch_keep.py 2 (prints the calls made and those that failed)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
typedef int (*fn)(void **, size_t, void *);
static unsigned long calls, failed;
int cudaMallocAsync(void **p, size_t n, void *s) {
    static fn real;
    if (!real) real = (fn)dlsym(RTLD_NEXT, "cudaMallocAsync");
    int rc = real(p, n, s);
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (rc) {
        __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "MALLOCASYNC rc=%d size=%zu\n", rc, n);
    }
    return rc;
}
__attribute__((destructor)) static void summary(void) {
    fprintf(stderr, "MALLOCASYNC calls=%lu failed=%lu\n", calls, failed);
}
