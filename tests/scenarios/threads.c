/* threads: 8 threads × 10 000 cudaMalloc each, all allocated before any is freed (a barrier),
 * then every block freed except each thread's i % 100 == 0, so every counter is exact:
 * block i has 64 × (1 + i % 16) bytes.
 * build: -lcudart -lpthread */
#include "nullcudart.h"
#include "scenario.h"

#include <pthread.h>

#define THREADS 8
#define PER_THREAD 10000

static pthread_barrier_t all_allocated;

static size_t size_of_block(int i) { return 64 * (size_t)(1 + i % 16); }

static void *worker(void *arg) {
    (void)arg;
    void **blocks = calloc(PER_THREAD, sizeof *blocks);
    if (!blocks)
        exit(98);
    for (int i = 0; i < PER_THREAD; i++)
        CHECK(cudaMalloc(&blocks[i], size_of_block(i))); // @thread_alloc
    pthread_barrier_wait(&all_allocated);
    for (int i = 0; i < PER_THREAD; i++)
        if (i % 100 != 0)
            CHECK(cudaFree(blocks[i]));
    free(blocks);
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    CHECK(cudaFree(0));
    pthread_barrier_init(&all_allocated, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            return 97;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("threads done\n");
    return 0;
}
