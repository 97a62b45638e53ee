// driver_api.cu — a program that uses the CUDA driver API directly (linked with -lcuda), as
// frameworks and JIT runtimes do: cuMemAlloc / cuMemFree, no CUDA runtime allocation calls.
//
// Two device buffers are allocated; only the input is freed. The report must show ONE leaked
// allocation of 8 MiB (8 388 608 bytes) via cuMemAlloc_v2 (the ELF name cuda.h maps cuMemAlloc
// to; device memory) in upload_table at the line marked LEAK-HERE.
//
// BUILD: -lcuda
// EXPECT: summary allocations=2 frees=1 live_allocations=1 live_bytes=8388608 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1 bytes=8388608 api=cuMemAlloc_v2 kind=device function=upload_table
#include <cstdio>
#include <cstdlib>
#include <cuda.h>

#define CU_CHECK(call)                                                                     \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                          \
            std::fprintf(stderr, "%s:%d: %s failed with CUresult %d\n", __FILE__, __LINE__, \
                         #call, int(r_));                                                  \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

CUdeviceptr upload_table(size_t bytes) {
    CUdeviceptr table;
    CU_CHECK(cuMemAlloc(&table, bytes)); // LEAK-HERE
    CU_CHECK(cuMemsetD8(table, 0xab, bytes));
    return table;
}

int main() {
    CU_CHECK(cuInit(0));
    CUdevice dev;
    CU_CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));

    CUdeviceptr input;
    CU_CHECK(cuMemAlloc(&input, 1 << 20));
    CU_CHECK(cuMemsetD8(input, 0, 1 << 20));
    CUdeviceptr table = upload_table(8 << 20);
    CU_CHECK(cuCtxSynchronize());
    CU_CHECK(cuMemFree(input));
    // table is never freed. (Releasing the primary context would make the driver reclaim it
    // silently; a leak checker cannot see that, and the program still forgot the free.)
    std::printf("driver_api: table at 0x%llx\n", (unsigned long long)table);
    return 0;
}
