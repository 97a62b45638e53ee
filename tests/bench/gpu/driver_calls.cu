// driver_calls: what the driver calls a stream-ordered hook may add cost, each timed alone on
// the GPU machine (bare, no shim): cuStreamIsCapturing (asked at every stream-ordered
// allocation and free, hooks/pools.rs), cuCtxGetDevice, and a cuMemAllocAsync + cuMemFreeAsync
// pair of 1 KiB on the null stream for scale. Prints `NAME_ns N` lines (median of 7 batches).
//
//     nvcc -O2 -o driver_calls driver_calls.cu -lcuda && ./driver_calls [CALLS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <vector>

static void check(CUresult rc, const char *what) {
    if (rc != CUDA_SUCCESS) {
        std::fprintf(stderr, "driver_calls: %s failed: %d\n", what, rc);
        std::exit(1);
    }
}

template <class F> static double median_ns(int calls, F f) {
    std::vector<double> batches;
    for (int b = 0; b < 7; b++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; i++) f();
        auto t1 = std::chrono::steady_clock::now();
        batches.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
    }
    std::sort(batches.begin(), batches.end());
    return batches[3];
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? std::atoi(argv[1]) : 200000;
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    CUstreamCaptureStatus status;
    std::printf("is_capturing_ns %.1f\n", median_ns(calls, [&] {
                    check(cuStreamIsCapturing(nullptr, &status), "cuStreamIsCapturing");
                }));
    CUdevice d;
    std::printf("ctx_get_device_ns %.1f\n",
                median_ns(calls, [&] { check(cuCtxGetDevice(&d), "cuCtxGetDevice"); }));
    CUdeviceptr p;
    std::printf("alloc_free_async_ns %.1f\n", median_ns(calls / 10, [&] {
                    check(cuMemAllocAsync(&p, 1024, nullptr), "cuMemAllocAsync");
                    check(cuMemFreeAsync(p, nullptr), "cuMemFreeAsync");
                }));
    check(cuStreamSynchronize(nullptr), "cuStreamSynchronize");
    return 0;
}
