// double_free.cu — a cleanup function that frees a buffer but does not clear the pointer, called
// once on an error path and again at the end: the second cudaFree fails (invalid argument).
//
// The report must show ONE double free: cudaFree called from release_buffers at the line marked
// FREED-TWICE, naming where the block was allocated (main, line marked ALLOC-HERE); and no leak.
//
// EXPECT: summary allocations=1 frees=1 live_allocations=0 live_bytes=0 failed_allocations=0 invalid_frees=1
// EXPECT: event type=double_free marker=FREED-TWICE count=1 api=cudaFree function=release_buffers alloc_marker=ALLOC-HERE
#include "check.h"

struct Buffers {
    float *d_work = nullptr;
};

void release_buffers(Buffers &b) {
    cudaError_t err = cudaFree(b.d_work); // FREED-TWICE
    if (err != cudaSuccess) std::printf("double_free: cudaFree -> %s\n", cudaGetErrorString(err));
    // Bug: b.d_work is not reset to nullptr, so a second call frees the same address again.
}

int main() {
    Buffers b;
    CHECK(cudaMalloc(&b.d_work, 256 * 1024)); // ALLOC-HERE
    CHECK(cudaMemset(b.d_work, 0, 256 * 1024));

    bool validation_failed = true; // the error path cleans up early...
    if (validation_failed) release_buffers(b);

    release_buffers(b); // ...and the normal path cleans up again
    cudaGetLastError();
    return 0;
}
