// correct_usage.cu — tutorial §3.1, the right way: one cudaMalloc, use, one cudaFree.
//
// The report must show NOTHING: no live allocation, no failed allocation, no bad free.
// Exactly one allocation and one free are seen.
//
// EXPECT: summary allocations=1 frees=1 live_allocations=0 live_bytes=0 failed_allocations=0 invalid_frees=0
#include "check.h"

__global__ void scale(float *data, int n, float factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

int main() {
    const int N = 1 << 16;
    static float h_data[N];
    for (int i = 0; i < N; i++) h_data[i] = float(i);

    float *d_data;
    // The first argument is the address of the pointer (a float**), not the pointer itself.
    CHECK(cudaMalloc(&d_data, N * sizeof(float)));
    CHECK(cudaMemcpy(d_data, h_data, N * sizeof(float), cudaMemcpyHostToDevice));
    scale<<<(N + 255) / 256, 256>>>(d_data, N, 2.0f);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h_data, d_data, N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_data));

    std::printf("correct_usage: h_data[1] = %g\n", h_data[1]);
    return 0;
}
