// host_register.cu — memory the program allocated itself and page-locked with cudaHostRegister
// stays pinned until cudaHostUnregister; forgetting that is a leak of pinned host memory, and
// cudaFreeHost cannot undo it (it is not a cudaMallocHost block).
//
// Two 1 MiB staging buffers are registered; the second is unregistered, the first is not. A
// cudaFreeHost of the first fails (it was never cudaMallocHost'd) and changes nothing. The
// report must show ONE leaked registration of 1 MiB (1 048 576 bytes) via cudaHostRegister (kind
// registered; cuMemHostRegister_v2 in a static build) in pin_staging at the line marked
// LEAK-HERE, and one invalid free via cudaFreeHost (cuMemFreeHost static) at WRONG-FREE.
//
// EXPECT: summary allocations=3 frees=2 live_allocations=1 live_bytes=1048576 failed_allocations=0 invalid_frees=1
// EXPECT: leak marker=LEAK-HERE count=1 bytes=1048576 api=cudaHostRegister kind=registered function=pin_staging
// EXPECT: event type=invalid_free marker=WRONG-FREE count=1 api=cudaFreeHost
#include <cstdlib>
#include <cstring>
#include "check.h"

const size_t BYTES = 1 << 20;

void *pin_staging() {
    void *p = std::aligned_alloc(4096, BYTES);
    CHECK(cudaHostRegister(p, BYTES, cudaHostRegisterDefault)); // LEAK-HERE
    return p;
}

int main() {
    void *up = pin_staging();
    void *down = std::aligned_alloc(4096, BYTES);
    CHECK(cudaHostRegister(down, BYTES, cudaHostRegisterDefault));
    std::memset(up, 7, BYTES);

    void *d_buf;
    CHECK(cudaMalloc(&d_buf, BYTES));
    CHECK(cudaMemcpy(d_buf, up, BYTES, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(down, d_buf, BYTES, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_buf));
    CHECK(cudaHostUnregister(down));
    std::free(down);
    // The wrong call for registered memory: it fails, and `up` stays registered.
    cudaError_t wrong = cudaFreeHost(up); // WRONG-FREE
    std::printf("host_register: round trip of %zu bytes done, cudaFreeHost(registered) %s\n", BYTES,
                wrong == cudaSuccess ? "succeeded" : "failed");
    return 0;
}
