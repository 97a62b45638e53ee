// cusolver_service: a request handler that makes a cuSOLVER dense handle per request. argv[1] =
// leak | one | clean. Each of 10 requests Cholesky-factors a 64x64 diagonal matrix (its own
// workspace, cudaMalloc'd and freed) and checks the factor and devInfo.
//   leak   handle_request makes a handle at the `// LEAK` line and never calls
//          cusolverDnDestroy. Expected under `cudaleak run`: exit 23, a row of 10 cuSOLVER
//          handles never destroyed at that line.
//   one    main makes one handle that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its handle: exit 0.
// Run by scripts/gpu-handles.sh; by hand on a GPU machine:
//   nvcc -g -lineinfo -arch=sm_90 -o cusolver_service tests/gpu/handles/cusolver_service.cu -lcusolver
//   cudaleak run -- ./cusolver_service leak
#include "service.h"
#include <cusolverDn.h>

constexpr int N = 64, REQUESTS = 10;
static float *d_a;
static int *d_info;

// A = 4 I, so its Cholesky factor is 2 I.
__global__ void diagonal(float *a, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i * n + i] = v;
}

static void serve(cusolverDnHandle_t h, int i) {
    fill(d_a, N * N, 0.0f);
    diagonal<<<1, N>>>(d_a, N, 4.0f);
    CK(cudaGetLastError());
    int lwork = 0;
    CK(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, N, d_a, N, &lwork));
    float *d_work;
    CK(cudaMalloc(&d_work, (lwork > 0 ? lwork : 1) * sizeof(float)));
    CK(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, N, d_a, N, d_work, lwork, d_info));
    int info = -1;
    float l = 0;
    CK(cudaMemcpy(&info, d_info, sizeof info, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&l, d_a + (i % N) * (N + 1), sizeof l, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_work));
    if (info != 0 || l != 2.0f) {
        fprintf(stderr, "cusolver_service: request %d: info %d, L = %g, expected 0 and 2\n", i,
                info, l);
        exit(1);
    }
}

static void handle_request(int i, bool destroy) {
    cusolverDnHandle_t h;
    CK(cusolverDnCreate(&h)); // LEAK
    serve(h, i);
    if (destroy)
        CK(cusolverDnDestroy(h));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    CK(cudaMalloc(&d_a, N * N * sizeof(float)));
    CK(cudaMalloc(&d_info, sizeof(int)));
    if (mode == Mode::one) {
        cusolverDnHandle_t h;
        CK(cusolverDnCreate(&h)); // ONE: the process's handle, never destroyed
        for (int i = 0; i < REQUESTS; ++i)
            serve(h, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    CK(cudaFree(d_a));
    CK(cudaFree(d_info));
    printf("cusolver_service %s: %d requests, done\n", mode_name(mode), REQUESTS);
    return 0;
}
