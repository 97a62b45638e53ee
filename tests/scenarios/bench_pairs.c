/* bench_pairs THREADS PAIRS DEPTH [async|batch|spike]: each thread, DEPTH calls deep, makes PAIRS
 * cuMemAlloc_v2 + cuMemFree_v2 pairs (with `async`: cuMemAllocAsync + cuMemFreeAsync on the
 * null stream, the route of PyTorch's cudaMallocAsync backend; with `batch`: 10 000 allocations
 * kept live, then their frees, as tests/bench/gpu/ab.cu's batch round) through the pointers
 * cuGetProcAddress_v2 returns (the route every CUDA runtime takes). Prints the wall time of the
 * parallel part per pair and in total, and the CPU time (user + system, all threads) per pair:
 * on a machine shared with other work the wall time says little, the CPU time more.
 * With `spike`, after the threads end, one more pair of SPIKE_BYTES (1 GiB, far above the
 * 4 KiB a thread holds at once): a dump's peak is then exactly SPIKE_BYTES, its live bytes 0
 * and its allocations THREADS * PAIRS + 1, unless a record was lost or counted twice
 * (scripts/thread-scaling.sh checks them).
 * Not a test: the benchmark runner (src/bin/bench.rs) runs it with and without the shim.
 * build: -ldl -lpthread */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef unsigned long long CUdeviceptr;
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*alloc_fn)(CUdeviceptr *, size_t);
typedef int (*free_fn)(CUdeviceptr);
typedef int (*alloc_async_fn)(CUdeviceptr *, size_t, void *);
typedef int (*free_async_fn)(CUdeviceptr, void *);

static alloc_fn mem_alloc;
static free_fn mem_free;
static alloc_async_fn mem_alloc_async;
static free_async_fn mem_free_async;
static long pairs;
static int depth;
#define BATCH 10000
static int batch;
#define SPIKE_BYTES (1ull << 30)
static pthread_barrier_t start;

static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void loop(void) {
    if (batch) {
        CUdeviceptr *live = malloc(BATCH * sizeof *live);
        if (!live) exit(99);
        for (long done = 0; done < pairs; done += BATCH) {
            long n = pairs - done < BATCH ? pairs - done : BATCH;
            for (long i = 0; i < n; i++)
                if (mem_alloc(&live[i], 4096) != 0) exit(99);
            for (long i = 0; i < n; i++)
                if (mem_free(live[i]) != 0) exit(99);
        }
        free(live);
        return;
    }
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr p;
        if (mem_alloc_async) {
            if (mem_alloc_async(&p, 4096, NULL) != 0 || mem_free_async(p, NULL) != 0) exit(99);
        } else if (mem_alloc(&p, 4096) != 0 || mem_free(p) != 0) {
            exit(99);
        }
    }
}

__attribute__((noinline)) static void deep(int d) {
    if (d <= 0)
        loop();
    else
        deep(d - 1);
    __asm__ volatile("" ::: "memory");
}

/* When each thread began and ended its loop: the parallel part runs from the first start to the
 * last end. Read by each thread itself, not by main after the barrier: with more threads than
 * cores, main may run again only after the workers have finished (seen: 0.02 ns a pair). */
static double began[256], ended[256];

static void *worker(void *arg) {
    long i = (long)arg;
    pthread_barrier_wait(&start);
    began[i] = now();
    deep(depth);
    ended[i] = now();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: bench_pairs THREADS PAIRS DEPTH [async|batch|spike]\n");
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
    batch = argc == 5 && !strcmp(argv[4], "batch");
    int spike = argc == 5 && !strcmp(argv[4], "spike");
    if (argc == 5 && !batch && !spike) {
        gpa("cuMemAllocAsync", (void **)&mem_alloc_async, 11020, 0, &status);
        gpa("cuMemFreeAsync", (void **)&mem_free_async, 11020, 0, &status);
        if (!mem_alloc_async || !mem_free_async) return 98;
    }
    pthread_t tids[256];
    if (threads < 1 || threads > 256) return 2;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, worker, (void *)t);
    /* The threads wait in the barrier, asleep: the CPU time from here on is their loops'. */
    double c0 = cpu_now();
    pthread_barrier_wait(&start);
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    double cpu = cpu_now() - c0, t0 = began[0], t1 = ended[0];
    for (int t = 1; t < threads; t++) {
        if (began[t] < t0) t0 = began[t];
        if (ended[t] > t1) t1 = ended[t];
    }
    double elapsed = t1 - t0;
    printf("ns_per_pair %.2f\npairs_per_s %.0f\ncpu_ns_per_pair %.2f\n",
           elapsed * 1e9 / ((double)pairs * threads), (double)pairs * threads / elapsed,
           cpu * 1e9 / ((double)pairs * threads));
    if (spike) {
        CUdeviceptr p;
        if (mem_alloc(&p, SPIKE_BYTES) != 0 || mem_free(p) != 0) return 99;
        printf("peak_bytes %llu\nallocations %ld\n", SPIKE_BYTES, pairs * threads + 1);
    }
    return 0;
}
