/* bench_scale BLOCKS: allocates BLOCKS small device blocks through cuGetProcAddress_v2's
 * cuMemAlloc_v2 from 1000 call sites in turn and leaves them all live at exit. Prints the
 * resident memory it gained while allocating, how long the allocations took, and the
 * CLOCK_REALTIME moment main returns, so the runner can tell how long the exit dump took and
 * what each live record costs.
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

/* 1000 call sites, each its own function (so each has its own stack). */
#define SITE(n)                                                                                 \
    __attribute__((noinline)) static void site##n(size_t size) {                                \
        CUdeviceptr p;                                                                           \
        if (mem_alloc(&p, size) != 0) exit(99);                                                  \
        __asm__ volatile("" ::"g"(p) : "memory");                                                \
    }
#define SITES10(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7) SITE(a##8) SITE(a##9)
#define SITES100(a) SITES10(a##0) SITES10(a##1) SITES10(a##2) SITES10(a##3) SITES10(a##4) SITES10(a##5) SITES10(a##6) SITES10(a##7) SITES10(a##8) SITES10(a##9)
SITES100(_0) SITES100(_1) SITES100(_2) SITES100(_3) SITES100(_4) SITES100(_5) SITES100(_6) SITES100(_7) SITES100(_8) SITES100(_9)
#define REF10(a) site##a##0, site##a##1, site##a##2, site##a##3, site##a##4, site##a##5, site##a##6, site##a##7, site##a##8, site##a##9
#define REF100(a) REF10(a##0), REF10(a##1), REF10(a##2), REF10(a##3), REF10(a##4), REF10(a##5), REF10(a##6), REF10(a##7), REF10(a##8), REF10(a##9)
#define SITES 1000
static void (*const sites[SITES])(size_t) = {REF100(_0), REF100(_1), REF100(_2), REF100(_3), REF100(_4),
                                             REF100(_5), REF100(_6), REF100(_7), REF100(_8), REF100(_9)};

static long long now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

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
    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < blocks; i++) sites[i % SITES](256 + (size_t)(i % SITES));
    long long t1 = now_ns(CLOCK_MONOTONIC);
    long after = rss_kib();
    printf("rss_gain_kib %ld\nalloc_ns %lld\nmain_end_ns %lld\n", after - before, t1 - t0,
           now_ns(CLOCK_REALTIME));
    fflush(stdout);
    return 0;
}
