/* threads_churn: 16 threads allocate and free through the driver (cuMemAlloc_v2/cuMemFree_v2)
 * for argv[1] seconds (default 10), in batches of 8 allocated then freed; at the end each thread
 * leaves exactly 5 blocks live. The program counts its own successful calls and prints the
 * totals on one line:
 *   allocations A frees F live L live_bytes B bytes_allocated T
 * Tests run it with CUDALEAK_SNAPSHOT_INTERVAL so snapshots are taken while threads allocate.
 * build: -lcuda -lpthread */
#include "nullcuda.h"
#include "scenario.h"

#include <pthread.h>
#include <time.h>

#define THREADS 16
#define BATCH 8
#define KEPT 5

struct worker {
    pthread_t thread;
    int id;
    uint64_t allocations, frees, live, live_bytes, bytes_allocated;
    CUdeviceptr kept[KEPT];
};

static struct timespec deadline;

static int past_deadline(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline.tv_sec ||
           (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}

SITE int alloc_one(struct worker *w, CUdeviceptr *p, size_t size) {
    if (cuMemAlloc_v2(p, size) != CUDA_SUCCESS) // @churn_alloc
        return -1;
    w->allocations++;
    w->bytes_allocated += size;
    return 0;
}

static void *work(void *arg) {
    struct worker *w = arg;
    CUdeviceptr batch[BATCH];
    uint64_t n = 0;
    while (!past_deadline()) {
        for (int j = 0; j < BATCH; j++, n++)
            if (alloc_one(w, &batch[j], 256 * (1 + n % 7) + (size_t)w->id) != 0)
                exit(99);
        for (int j = 0; j < BATCH; j++) {
            if (cuMemFree_v2(batch[j]) != CUDA_SUCCESS)
                exit(98);
            w->frees++;
        }
    }
    for (int k = 0; k < KEPT; k++) {
        size_t size = 1000 + 10 * (size_t)w->id + (size_t)k;
        if (alloc_one(w, &w->kept[k], size) != 0)
            exit(99);
        w->live++;
        w->live_bytes += size;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 10;
    static struct worker workers[THREADS];
    CHECK(cuInit(0));
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += seconds;
    for (int i = 0; i < THREADS; i++) {
        workers[i].id = i;
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) != 0)
            return 97;
    }
    uint64_t allocations = 0, frees = 0, live = 0, live_bytes = 0, bytes_allocated = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(workers[i].thread, NULL);
        allocations += workers[i].allocations;
        frees += workers[i].frees;
        live += workers[i].live;
        live_bytes += workers[i].live_bytes;
        bytes_allocated += workers[i].bytes_allocated;
    }
    printf("allocations %llu frees %llu live %llu live_bytes %llu bytes_allocated %llu\n",
           (unsigned long long)allocations, (unsigned long long)frees, (unsigned long long)live,
           (unsigned long long)live_bytes, (unsigned long long)bytes_allocated);
    return 0;
}
