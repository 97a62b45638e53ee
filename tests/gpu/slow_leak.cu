// slow_leak: the seed's 12-hour leak, in seconds. Each step allocates a scratch buffer and frees
// it, and holds one fixed model buffer; every step also "caches" a 256 KiB result that is never
// freed (the leak). Run with CUDALEAK_SNAPSHOT_INTERVAL=1: `cudaleak report --growth` must name
// remember_result() as the growing callsite, and not the steady model buffer or the scratch.
// GPU validation for issue 5 (scripts/gpu-growth.sh).
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>

__global__ void touch(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1.0f;
}

static void remember_result(float **slot) {
    cudaMalloc(slot, 256 << 10); // LEAK-HERE: one per step, never freed
}

int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 6;
    float *model;
    cudaMalloc(&model, 64 << 20); // steady: allocated once, live throughout
    static float *results[100000];
    int steps = seconds * 20;
    for (int s = 0; s < steps; s++) {
        float *scratch;
        cudaMalloc(&scratch, 8 << 20);
        touch<<<1024, 256>>>(scratch, 1 << 18);
        cudaDeviceSynchronize();
        cudaFree(scratch);
        remember_result(&results[s]);
        usleep(50000);
    }
    cudaFree(model);
    printf("slow_leak: %d steps\n", steps);
    return 0;
}
