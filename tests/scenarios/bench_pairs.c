/* bench_pairs THREADS PAIRS DEPTH: each thread, DEPTH calls deep, makes PAIRS cuMemAlloc_v2 +
 * cuMemFree_v2 pairs through the pointers cuGetProcAddress_v2 returns (the route every CUDA
 * runtime takes). Prints the wall time of the parallel part per pair and in total.
 * Not a test: the benchmark runner (src/bin/bench.rs) runs it with and without the shim.
 * build: -ldl -lpthread */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(CUdeviceptr *, size_t);
typedef int (*free_fn)(CUdeviceptr);

static alloc_fn mem_alloc;
static free_fn mem_free;
static long pairs;
static int depth;
static pthread_barrier_t start;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void loop(void) {
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (mem_alloc(&p, 4096) != 0 || mem_free(p) != 0) exit(99);
    }
}

__attribute__((noinline)) static void deep(int d) {
    if (d <= 0)
        loop();
    else
        deep(d - 1);
    __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    deep(depth);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: bench_pairs THREADS PAIRS DEPTH\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    pairs = atol(argv[2]);
    depth = atoi(argv[3]);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    if (!driver) return 98;
    gpa_fn gpa = (gpa_fn)dlsym(driver, "cuGetProcAddress_v2");
    int status;
    gpa("cuMemAlloc", (void **)&mem_alloc, 3020, 0, &status);
    gpa("cuMemFree", (void **)&mem_free, 3020, 0, &status);
    pthread_t tids[256];
    if (threads < 1 || threads > 256) return 2;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) pthread_create(&tids[t], NULL, worker, NULL);
    pthread_barrier_wait(&start);
    double t0 = now();
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    double elapsed = now() - t0;
    printf("ns_per_pair %.2f\npairs_per_s %.0f\n", elapsed * 1e9 / ((double)pairs * threads),
           (double)pairs * threads / elapsed);
    return 0;
}
