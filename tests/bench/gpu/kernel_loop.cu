// kernel_loop: per iteration one 4 MiB cudaMalloc, a dozen kernel launches over it, a
// cudaFree; synchronised every iteration. GPU benchmark (scripts/gpu-bench.sh).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void axpb(float *x, int n, float a, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    const int n = 1 << 20;
    if (cudaFree(nullptr) != cudaSuccess) return 1;
    double t0 = now();
    for (int it = 0; it < iterations; it++) {
        float *x;
        if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 1;
        cudaMemsetAsync(x, 0, n * sizeof(float));
        for (int k = 0; k < 12; k++) axpb<<<(n + 255) / 256, 256>>>(x, n, 1.0001f, 0.5f);
        if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) return 1;
        if (cudaFree(x) != cudaSuccess) return 1;
    }
    double s = now() - t0;
    printf("loop_s %.6f\nus_per_iteration %.3f\n", s, s * 1e6 / iterations);
    return 0;
}
