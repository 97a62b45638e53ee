// threads.cu — leaks from several host threads at once. Four worker threads each allocate a
// 64 KiB scratch buffer and a 16 KiB result buffer; each frees its result and forgets its scratch.
//
// The report must show ONE leak group: 4 allocations, 262 144 bytes, via cudaMalloc (device
// memory) in worker at the line marked LEAK-HERE, made by 4 different threads.
//
// EXPECT: summary allocations=8 frees=4 live_allocations=4 live_bytes=262144 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=4 bytes=262144 threads=4 api=cudaMalloc kind=device function=worker
#include <thread>
#include <vector>
#include "check.h"

__global__ void iota(int *p, int n, int base) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = base + i;
}

void worker(int id) {
    int *d_scratch, *d_result;
    CHECK(cudaMalloc(&d_scratch, 64 * 1024)); // LEAK-HERE
    CHECK(cudaMalloc(&d_result, 16 * 1024));
    iota<<<16, 256>>>(d_scratch, 16 * 1024, id);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(d_result, d_scratch, 16 * 1024, cudaMemcpyDeviceToDevice));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d_result));
    // d_scratch: every thread forgets it.
}

int main() {
    // Initialise the context once on the main thread, so the workers do not race to do it.
    CHECK(cudaFree(0));
    std::vector<std::thread> pool;
    for (int id = 0; id < 4; id++) pool.emplace_back(worker, id);
    for (auto &t : pool) t.join();
    std::printf("threads: 4 workers done\n");
    return 0;
}
