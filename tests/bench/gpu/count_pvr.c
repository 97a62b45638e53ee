// count_pvr: an LD_PRELOAD interposer that counts process_vm_readv calls (the shim's fallible Python
// reads), their ranges, bytes and time, and prints them at exit. Preload it after the shim:
//   gcc -O2 -shared -fPIC -o /tmp/count_pvr.so tests/bench/gpu/count_pvr.c -ldl
//   LD_PRELOAD=libcudaleak.so:/tmp/count_pvr.so python3 tests/bench/gpu/torch_alloc.py 20 20000 2
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/uio.h>
#include <time.h>
static unsigned long calls, iovs, bytes, ns, fails;
static ssize_t (*real)(pid_t, const struct iovec *, unsigned long, const struct iovec *, unsigned long, unsigned long);
ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long ln, const struct iovec *r, unsigned long rn, unsigned long f) {
    if (!real) real = dlsym(RTLD_NEXT, "process_vm_readv");
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ssize_t n = real(pid, l, ln, r, rn, f);
    clock_gettime(CLOCK_MONOTONIC, &b);
    __atomic_fetch_add(&calls, 1, 0);
    __atomic_fetch_add(&iovs, rn, 0);
    if (n > 0) __atomic_fetch_add(&bytes, n, 0); else __atomic_fetch_add(&fails, 1, 0);
    __atomic_fetch_add(&ns, (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec), 0);
    return n;
}
__attribute__((destructor)) static void report(void) {
    if (calls) fprintf(stderr, "pvr: %lu calls, %lu ranges, %lu bytes, %lu failed, %.0f ns/call\n", calls, iovs, bytes, fails, (double)ns / calls);
}
