// curand_service: a request handler that makes a cuRAND generator per request. argv[1] = leak |
// one | clean. Each of 20 requests fills a buffer it cudaMallocs (and frees) with 1M uniform
// floats (curandGenerateUniform) and checks that they lie in (0, 1].
//   leak   handle_request makes a generator at the `// LEAK` line and never calls
//          curandDestroyGenerator. Expected under `cudaleak run`: exit 23, a row of 20 cuRAND
//          generators never destroyed at that line (the request buffers are freed: not leaks).
//   one    main makes one generator that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its generator: exit 0.
// Run by scripts/gpu-handles.sh; by hand on a GPU machine:
//   nvcc -g -lineinfo -arch=sm_90 -o curand_service tests/gpu/handles/curand_service.cu -lcurand
//   cudaleak run -- ./curand_service leak
#include "service.h"
#include <curand.h>

constexpr size_t N = 1 << 20;
constexpr int REQUESTS = 20;

static void serve(curandGenerator_t gen, int i) {
    float *d_u;
    CK(cudaMalloc(&d_u, N * sizeof(float)));
    CK(curandSetPseudoRandomGeneratorSeed(gen, 1234 + i));
    CK(curandGenerateUniform(gen, d_u, N));
    float u[4];
    CK(cudaMemcpy(u, d_u, sizeof u, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_u));
    for (float v : u) {
        if (!(v > 0.0f && v <= 1.0f)) {
            fprintf(stderr, "curand_service: request %d: %g is not in (0, 1]\n", i, v);
            exit(1);
        }
    }
}

static void handle_request(int i, bool destroy) {
    curandGenerator_t gen;
    CK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_DEFAULT)); // LEAK
    serve(gen, i);
    if (destroy)
        CK(curandDestroyGenerator(gen));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    if (mode == Mode::one) {
        curandGenerator_t gen;
        CK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_DEFAULT)); // ONE: never destroyed
        for (int i = 0; i < REQUESTS; ++i)
            serve(gen, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    printf("curand_service %s: %d requests, done\n", mode_name(mode), REQUESTS);
    return 0;
}
