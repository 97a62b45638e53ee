// leak_error_path.cu — tutorial §3.2, leak scenario 2: an early return on an error path skips the
// cudaFree at the end of process_data.
//
// process_data runs three times; the second input is invalid, so that call returns early.
// The report must show ONE leaked allocation of 4 MiB (4 194 304 bytes) via cudaMalloc (device
// memory), allocated in process_data at the line marked LEAK-HERE. The two good calls freed theirs.
//
// EXPECT: summary allocations=3 frees=2 live_allocations=1 live_bytes=4194304 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1 bytes=4194304 api=cudaMalloc kind=device function=process_data
#include "check.h"

const int N = 1 << 20;

__global__ void normalize(float *d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = d[i] / float(n);
}

// Returns false when the input is rejected.
bool process_data(float *h_data) {
    float *d_data;
    CHECK(cudaMalloc(&d_data, N * sizeof(float))); // LEAK-HERE
    CHECK(cudaMemcpy(d_data, h_data, N * sizeof(float), cudaMemcpyHostToDevice));

    bool some_error_condition = h_data[0] < 0.0f; // "negative input is invalid"
    if (some_error_condition) {
        std::fprintf(stderr, "process_data: invalid input, skipping\n");
        return false; // d_data is never freed!
    }

    normalize<<<(N + 255) / 256, 256>>>(d_data, N);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h_data, d_data, N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_data));
    return true;
}

int main() {
    static float h_data[N];
    int ok = 0;
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < N; i++) h_data[i] = float(i);
        if (run == 1) h_data[0] = -1.0f;
        ok += process_data(h_data);
    }
    std::printf("leak_error_path: %d of 3 inputs processed\n", ok);
    return 0;
}
