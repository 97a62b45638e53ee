// cublas_service: a request handler that makes a cuBLAS handle per request. argv[1] = leak | one
// | clean. Each of 40 requests runs one 64x64 SGEMM of all-ones matrices scaled by the request
// number and checks the result.
//   leak   handle_request makes a handle at the `// LEAK` line and never destroys it. Expected
//          under `cudaleak run`: exit 23, a row of 40 cuBLAS handles never destroyed at that line.
//   one    main makes one handle that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its handle: exit 0.
// Run by scripts/gpu-handles.sh; by hand on a GPU machine:
//   nvcc -g -lineinfo -arch=sm_90 -o cublas_service tests/gpu/handles/cublas_service.cu -lcublas
//   cudaleak run -- ./cublas_service leak
#include "service.h"
#include <initializer_list>
#include <cublas_v2.h>

constexpr int N = 64, REQUESTS = 40;
static float *d_a, *d_b, *d_c;

static void serve(cublasHandle_t h, int i) {
    const float alpha = (float)(i + 1), beta = 0.0f;
    CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, d_a, N, d_b, N, &beta, d_c, N));
    float c = 0;
    CK(cudaMemcpy(&c, d_c + N * N - 1, sizeof c, cudaMemcpyDeviceToHost));
    if (c != alpha * N) {
        fprintf(stderr, "cublas_service: request %d: C = %g, expected %g\n", i, c, alpha * N);
        exit(1);
    }
}

static void handle_request(int i, bool destroy) {
    cublasHandle_t h;
    CK(cublasCreate(&h)); // LEAK
    serve(h, i);
    if (destroy)
        CK(cublasDestroy(h));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    for (float **p : {&d_a, &d_b, &d_c}) {
        CK(cudaMalloc(p, N * N * sizeof(float)));
        fill(*p, N * N, 1.0f);
    }
    if (mode == Mode::one) {
        cublasHandle_t h;
        CK(cublasCreate(&h)); // ONE: the process's handle, never destroyed
        for (int i = 0; i < REQUESTS; ++i)
            serve(h, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    for (float *p : {d_a, d_b, d_c})
        CK(cudaFree(p));
    printf("cublas_service %s: %d requests, done\n", mode_name(mode), REQUESTS);
    return 0;
}
