/* handles: library handles at exit (issue 24), through the stand-ins of tests/frameworks, which
 * allocate with cuMemAlloc_v2 from unnamed frames under their create calls: cuBLAS 1 MiB + 4 KiB,
 * cuBLASLt 64 KiB, cuDNN 48 KiB + 1 KiB, cuFFT nx * 8 * batch at cufftMakePlan1d (cufftPlan1d
 * makes one through the exported cufftCreate and cufftMakePlan1d), cuRAND 192 KiB at the first
 * curandGenerateUniform, cuSPARSE nothing, cuSOLVER 32 KiB plus a cuBLAS handle of its own (a
 * nested cublasCreate_v2), NCCL 1 MiB. argv[1] picks the mode:
 *   per-request: handle_request(i), 40 times, creates a cuBLAS handle and drops it; then 5
 *     requests each of fft_request (cufftPlan1d, nx 256, batch 10: 20480 bytes), rng_request
 *     (a generator, used once) and dnn_request (a cuDNN handle); none is destroyed: one handle
 *     per call, leaked.
 *   slow: the 40 cuBLAS requests alone, 100 ms apart (for `run --growth`).
 *   one: init_libraries creates one handle of each library once (the plan with cufftCreate then
 *     cufftMakePlan1d, nx 1000, batch 3: 24000 bytes; the generator used once; the communicator
 *     through one all-reduce, which sets up its 2 MiB of channels) and keeps it: one
 *     per process, held, not leaked.
 *   clean: one of each (through init_libraries, plus a second plan from cufftPlan1d and a
 *     second NCCL communicator, which is aborted rather than destroyed) created and destroyed,
 *     then 10 cuBLAS handles created and destroyed in a loop: nothing left.
 *   threads: 4 threads each create one cuBLAS handle at one site and keep it: one per thread,
 *     held, not leaked.
 * Prints "done" and exits 0; a missing or unknown mode exits 2.
 * build: -lcuda -lpthread -lcublas -lcublasLt -lcudnn -lcufft -lcurand -lcusparse -lcusolver -lnccl */
#include "nullcuda.h"
#include "scenario.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasLtCreate(void **handle);
int cublasLtDestroy(void *handle);
int cudnnCreate(void **handle);
int cudnnDestroy(void *handle);
int cufftCreate(int *plan);
int cufftMakePlan1d(int plan, int nx, int type, int batch, size_t *work_size);
int cufftPlan1d(int *plan, int nx, int type, int batch);
int cufftDestroy(int plan);
int curandCreateGenerator(void **generator, int rng_type);
int curandGenerateUniform(void *generator, float *out, size_t n);
int curandDestroyGenerator(void *generator);
int cusparseCreate(void **handle);
int cusparseDestroy(void *handle);
int cusolverDnCreate(void **handle);
int cusolverDnDestroy(void *handle);
typedef struct {
    char internal[128];
} ncclUniqueId;
int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank);
int ncclCommDestroy(void *comm);
int ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int op, void *comm,
                  void *stream);
int ncclCommAbort(void *comm);

#define CUFFT_R2C 0x2a
#define CURAND_RNG_PSEUDO_DEFAULT 100
#define REQUESTS 40
#define SIDE_REQUESTS 5
#define THREADS 4

/* Where generators write: a device pointer in real life; the stand-in never touches it. */
static float samples[256];

struct libraries {
    void *cublas, *cublaslt, *cudnn, *curand, *cusparse, *cusolver, *nccl;
    int plan;
};

static struct libraries kept;
static void *per_thread[THREADS];

SITE void handle_request(int i) {
    void *handle = NULL;
    CHECK(cublasCreate_v2(&handle)); // @create_per_request
    KEEP(handle);
    KEEP(i);
}

SITE void fft_request(int i) {
    int plan = 0;
    CHECK(cufftPlan1d(&plan, 256, CUFFT_R2C, 10)); // @plan_per_request
    KEEP(plan);
    KEEP(i);
}

SITE void rng_request(int i) {
    void *generator = NULL;
    CHECK(curandCreateGenerator(&generator, CURAND_RNG_PSEUDO_DEFAULT)); // @gen_per_request
    CHECK(curandGenerateUniform(generator, samples, 256)); // @gen_use_per_request
    KEEP(generator);
    KEEP(i);
}

SITE void dnn_request(int i) {
    void *handle = NULL;
    CHECK(cudnnCreate(&handle)); // @cudnn_per_request
    KEEP(handle);
    KEEP(i);
}

SITE void init_libraries(struct libraries *l) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    CHECK(cublasCreate_v2(&l->cublas)); // @one_cublas
    CHECK(cublasLtCreate(&l->cublaslt)); // @one_cublaslt
    CHECK(cudnnCreate(&l->cudnn)); // @one_cudnn
    CHECK(cufftCreate(&l->plan)); // @one_cufft
    CHECK(cufftMakePlan1d(l->plan, 1000, CUFFT_R2C, 3, NULL)); // @one_cufft_make
    CHECK(curandCreateGenerator(&l->curand, CURAND_RNG_PSEUDO_DEFAULT)); // @one_curand
    CHECK(curandGenerateUniform(l->curand, samples, 256)); // @one_curand_use
    CHECK(cusparseCreate(&l->cusparse)); // @one_cusparse
    CHECK(cusolverDnCreate(&l->cusolver)); // @one_cusolver
    CHECK(ncclCommInitRank(&l->nccl, 1, id, 0)); // @one_nccl
    CHECK(ncclAllReduce(samples, samples, 1, 0, 0, l->nccl, NULL)); // @one_nccl_use
    KEEP(l);
}

SITE void create_and_destroy_all(void) {
    struct libraries l;
    memset(&l, 0, sizeof l);
    init_libraries(&l);
    int planned = 0;
    void *aborted = NULL;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    CHECK(cufftPlan1d(&planned, 256, CUFFT_R2C, 10)); // @clean_cufft_plan
    CHECK(ncclCommInitRank(&aborted, 1, id, 0)); // @clean_nccl_abort
    CHECK(cublasDestroy_v2(l.cublas));
    CHECK(cublasLtDestroy(l.cublaslt));
    CHECK(cudnnDestroy(l.cudnn));
    CHECK(cufftDestroy(l.plan));
    CHECK(cufftDestroy(planned));
    CHECK(curandDestroyGenerator(l.curand));
    CHECK(cusparseDestroy(l.cusparse));
    CHECK(cusolverDnDestroy(l.cusolver));
    CHECK(ncclCommDestroy(l.nccl));
    CHECK(ncclCommAbort(aborted));
    for (int i = 0; i < 10; i++) {
        void *handle = NULL;
        CHECK(cublasCreate_v2(&handle)); // @clean_loop
        CHECK(cublasDestroy_v2(handle));
    }
}

SITE void thread_handle(int k) {
    CHECK(cublasCreate_v2(&per_thread[k])); // @per_thread
    KEEP(per_thread[k]);
}

static void *worker(void *arg) {
    thread_handle((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    CHECK(cuInit(0));
    if (strcmp(mode, "per-request") == 0) {
        for (int i = 0; i < REQUESTS; i++)
            handle_request(i);
        for (int i = 0; i < SIDE_REQUESTS; i++) {
            fft_request(i);
            rng_request(i);
            dnn_request(i);
        }
    } else if (strcmp(mode, "slow") == 0) {
        /* The per-request cuBLAS leak as a service runs it, 100 ms a request, for snapshots. */
        for (int i = 0; i < REQUESTS; i++) {
            handle_request(i);
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
    } else if (strcmp(mode, "one") == 0) {
        init_libraries(&kept);
    } else if (strcmp(mode, "clean") == 0) {
        create_and_destroy_all();
    } else if (strcmp(mode, "threads") == 0) {
        pthread_t threads[THREADS];
        for (int k = 0; k < THREADS; k++)
            if (pthread_create(&threads[k], NULL, worker, (void *)(intptr_t)k) != 0)
                return 97;
        for (int k = 0; k < THREADS; k++)
            pthread_join(threads[k], NULL);
    } else {
        fprintf(stderr, "usage: handles per-request|slow|one|clean|threads\n");
        return 2;
    }
    KEEP(&kept);
    printf("done\n");
    return 0;
}
