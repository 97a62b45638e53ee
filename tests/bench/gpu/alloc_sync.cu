// alloc_sync: N synchronous 1 MiB cudaMalloc + cudaFree pairs. GPU benchmark (scripts/gpu-bench.sh).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    if (cudaFree(nullptr) != cudaSuccess) return 1;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
    }
    double s = now() - t0;
    printf("loop_s %.6f\nus_per_pair %.3f\n", s, s * 1e6 / n);
    return 0;
}
