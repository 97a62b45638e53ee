// leak_loop.cu — tutorial §3.2, leak scenario 1: a loop that allocates a temporary buffer on every
// iteration and never frees it. 1000 iterations × 1024 floats = 1000 blocks of 4 KiB.
//
// The report must show ONE leak group, not a thousand entries: 1000 allocations, 4 096 000
// bytes, via cudaMalloc (device memory), allocated in run_batches at the line marked LEAK-HERE.
//
// EXPECT: summary allocations=1000 frees=0 live_allocations=1000 live_bytes=4096000 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1000 bytes=4096000 api=cudaMalloc kind=device function=run_batches
#include "check.h"

__global__ void fill(float *p, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

static void run_batches(int batches) {
    for (int i = 0; i < batches; i++) {
        float *d_temp;
        CHECK(cudaMalloc(&d_temp, 1024 * sizeof(float))); // LEAK-HERE
        fill<<<4, 256>>>(d_temp, 1024, float(i));
        CHECK(cudaGetLastError());
        // Forgot cudaFree(d_temp)! 4 KiB per iteration looks harmless; 100 MB per iteration
        // fills an 80 GB GPU after 800 iterations.
    }
}

int main() {
    run_batches(1000);
    CHECK(cudaDeviceSynchronize());
    std::printf("leak_loop: 1000 batches done\n");
    return 0;
}
