/* bench_scale BLOCKS: allocates BLOCKS small device blocks through cuGetProcAddress_v2's
 * cuMemAlloc_v2 from 64 call sites and leaves them all live at exit. Prints the resident
 * memory it gained while allocating and the CLOCK_REALTIME moment main returns, so the runner
 * can tell how long the exit dump took and what each live record costs.
 * build: -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(CUdeviceptr *, size_t);

static alloc_fn mem_alloc;

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

#define SITE(n)                                                                                 \
    __attribute__((noinline)) static void site##n(void) {                                       \
        CUdeviceptr p;                                                                           \
        if (mem_alloc(&p, 256 + n) != 0) exit(99);                                               \
    }
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4) SITES8(5) SITES8(6) SITES8(7) SITES8(8)
#define REF8(a) site##a##0, site##a##1, site##a##2, site##a##3, site##a##4, site##a##5, site##a##6, site##a##7
static void (*const sites[64])(void) = {REF8(1), REF8(2), REF8(3), REF8(4), REF8(5), REF8(6), REF8(7), REF8(8)};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_scale BLOCKS\n");
        return 2;
    }
    long blocks = atol(argv[1]);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    if (!driver) return 98;
    gpa_fn gpa = (gpa_fn)dlsym(driver, "cuGetProcAddress_v2");
    int status;
    gpa("cuMemAlloc", (void **)&mem_alloc, 3020, 0, &status);
    long before = rss_kib();
    for (long i = 0; i < blocks; i++) sites[i % 64]();
    long after = rss_kib();
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("rss_gain_kib %ld\nmain_end_ns %lld\n", after - before,
           (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
    fflush(stdout);
    return 0;
}
