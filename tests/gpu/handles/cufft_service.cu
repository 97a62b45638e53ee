// cufft_service: a request handler that makes a cuFFT plan per request. argv[1] = leak | one |
// clean. Each of 20 requests transforms a 64K-point complex impulse forward in place (one
// cufftExecC2C) and checks that the spectrum is flat.
//   leak   handle_request makes a plan at the `// LEAK` line and never calls cufftDestroy.
//          Expected under `cudaleak run`: exit 23, a row of 20 cuFFT plans never destroyed at
//          that line.
//   one    main makes one plan that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its plan: exit 0.
// Run by scripts/gpu-handles.sh; by hand on a GPU machine:
//   nvcc -g -lineinfo -arch=sm_90 -o cufft_service tests/gpu/handles/cufft_service.cu -lcufft
//   cudaleak run -- ./cufft_service leak
#include "service.h"
#include <cmath>
#include <cufft.h>

constexpr int N = 1 << 16, REQUESTS = 20;
static cufftComplex *d_x;

static void serve(cufftHandle plan, int i) {
    const cufftComplex impulse = {1.0f, 0.0f};
    CK(cudaMemset(d_x, 0, N * sizeof(cufftComplex)));
    CK(cudaMemcpy(d_x, &impulse, sizeof impulse, cudaMemcpyHostToDevice));
    CK(cufftExecC2C(plan, d_x, d_x, CUFFT_FORWARD));
    cufftComplex y;
    CK(cudaMemcpy(&y, d_x + (i * 977) % N, sizeof y, cudaMemcpyDeviceToHost));
    if (std::fabs(y.x - 1.0f) > 1e-4f || std::fabs(y.y) > 1e-4f) {
        fprintf(stderr, "cufft_service: request %d: X = %g%+gi, expected 1\n", i, y.x, y.y);
        exit(1);
    }
}

static void handle_request(int i, bool destroy) {
    cufftHandle plan;
    CK(cufftPlan1d(&plan, N, CUFFT_C2C, 1)); // LEAK
    serve(plan, i);
    if (destroy)
        CK(cufftDestroy(plan));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    CK(cudaMalloc(&d_x, N * sizeof(cufftComplex)));
    if (mode == Mode::one) {
        cufftHandle plan;
        CK(cufftPlan1d(&plan, N, CUFFT_C2C, 1)); // ONE: the process's plan, never destroyed
        for (int i = 0; i < REQUESTS; ++i)
            serve(plan, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    CK(cudaFree(d_x));
    printf("cufft_service %s: %d requests, done\n", mode_name(mode), REQUESTS);
    return 0;
}
