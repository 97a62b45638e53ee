// failed_allocation.cu — tutorial §3.5, rule one: "check every allocation; never assume there is
// enough memory". This program asks for 1 PiB (1 << 50 bytes, more than any GPU has), ignores the
// error code, prints it and carries on with a normal allocation that it frees.
//
// The report must show ONE failed allocation: cudaMalloc of 1 125 899 906 842 624 bytes, error 2
// (out of memory), called from main at the line marked FAILS-HERE; and no leak.
//
// EXPECT: summary allocations=1 frees=1 live_allocations=0 live_bytes=0 failed_allocations=1 invalid_frees=0
// EXPECT: event type=failed_allocation marker=FAILS-HERE count=1 api=cudaMalloc size=1125899906842624 error=2 function=main
#include "check.h"

int main() {
    const size_t huge = size_t(1) << 50;
    float *d_big = nullptr;
    cudaError_t err = cudaMalloc(&d_big, huge); // FAILS-HERE
    // The bug: the result is printed, not handled. A real program would go on to use d_big.
    std::printf("failed_allocation: cudaMalloc(1 PiB) -> %s\n", cudaGetErrorString(err));
    cudaGetLastError(); // clear the error so the rest of the program runs

    float *d_small;
    CHECK(cudaMalloc(&d_small, 4096));
    CHECK(cudaMemset(d_small, 0, 4096));
    CHECK(cudaFree(d_small));
    return 0;
}
