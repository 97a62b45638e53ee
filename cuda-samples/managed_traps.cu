// managed_traps.cu — tutorial §3.3: cudaMallocManaged looks simple (no explicit copies) but every
// kernel access may migrate pages between host and GPU, and the memory is easy to forget.
//
// A managed buffer of 262 144 floats is initialised on the host, used by a kernel and never
// freed; a second one is used the same way and freed correctly. The report must show ONE leaked
// managed allocation of 1 MiB (1 048 576 bytes) via cudaMallocManaged in prepare_weights at the
// line marked LEAK-HERE, and list that callsite as managed memory (migration/capacity risk).
//
// EXPECT: summary allocations=2 frees=1 live_allocations=1 live_bytes=1048576 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1 bytes=1048576 api=cudaMallocManaged kind=managed function=prepare_weights
#include "check.h"

const int N = 1 << 18;

__global__ void square(float *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * data[i];
}

// Initialised on the CPU: the kernel's first touch of each page faults and migrates it.
float *prepare_weights() {
    float *data;
    CHECK(cudaMallocManaged(&data, N * sizeof(float))); // LEAK-HERE
    for (int i = 0; i < N; i++) data[i] = float(i);
    square<<<(N + 255) / 256, 256>>>(data, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    return data; // the caller never frees it
}

// The tutorial's "looks simple" version, freed correctly.
void scratch_pass() {
    float *data;
    CHECK(cudaMallocManaged(&data, N * sizeof(float)));
    for (int i = 0; i < N; i++) data[i] = 1.0f;
    square<<<(N + 255) / 256, 256>>>(data, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(data));
}

int main() {
    float *weights = prepare_weights();
    scratch_pass();
    std::printf("managed_traps: weights[3] = %g\n", weights[3]);
    return 0; // weights is still live here
}
