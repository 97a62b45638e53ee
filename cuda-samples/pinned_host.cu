// pinned_host.cu — page-locked (pinned) host memory from cudaMallocHost is a CUDA allocation too,
// freed only by cudaFreeHost; leaking it pins host RAM for the life of the process.
//
// A pinned staging buffer is made for uploads and never released; a second, made with
// cudaHostAlloc for a download, is released with cudaFreeHost. The report must show ONE leaked
// host allocation of 4 MiB (4 194 304 bytes) via cudaMallocHost (kind host) in
// make_staging_buffer at the line marked LEAK-HERE.
//
// EXPECT: summary allocations=3 frees=2 live_allocations=1 live_bytes=4194304 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1 bytes=4194304 api=cudaMallocHost kind=host function=make_staging_buffer
#include <cstring>
#include "check.h"

const size_t BYTES = 4 << 20;

float *make_staging_buffer() {
    float *h_staging;
    // The (void **) matters: with a float ** C++ picks cuda_runtime.h's template overload, which
    // calls cudaHostAlloc, and the report would (truthfully) say cudaHostAlloc.
    CHECK(cudaMallocHost((void **)&h_staging, BYTES)); // LEAK-HERE
    std::memset(h_staging, 0, BYTES);
    return h_staging;
}

int main() {
    float *h_up = make_staging_buffer();
    float *h_down;
    CHECK(cudaHostAlloc(&h_down, BYTES, cudaHostAllocDefault));

    float *d_buf;
    CHECK(cudaMalloc(&d_buf, BYTES));
    CHECK(cudaMemcpy(d_buf, h_up, BYTES, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(h_down, d_buf, BYTES, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_buf));
    CHECK(cudaFreeHost(h_down));
    // h_up: never passed to cudaFreeHost.
    std::printf("pinned_host: round trip of %zu bytes done\n", BYTES);
    return 0;
}
