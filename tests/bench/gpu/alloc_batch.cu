// alloc_batch: ROUNDS times, 10 000 live 4 KiB cudaMalloc blocks, then cudaFree of all of them.
// Prints the timed loop's seconds and the time per alloc+free pair. GPU benchmark (scripts/gpu-bench.sh).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <cuda_runtime.h>

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const int blocks = 10000;
    std::vector<void *> p(blocks);
    if (cudaFree(nullptr) != cudaSuccess) return 1; // context creation, not timed
    double t0 = now();
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < blocks; i++)
            if (cudaMalloc(&p[i], 4096) != cudaSuccess) return 1;
        for (int i = 0; i < blocks; i++)
            if (cudaFree(p[i]) != cudaSuccess) return 1;
    }
    double s = now() - t0;
    printf("loop_s %.6f\nus_per_pair %.3f\n", s, s * 1e6 / (double(rounds) * blocks));
    return 0;
}
