/* unknown_capture_form: a runtime newer than the shim asks cuGetProcAddress for
 * cuStreamBeginCapture at a CUDA version where the driver hands out a form the shim has no hook
 * for (the null driver's cuStreamBeginCapture_v3 at cudaVersion 99000). Captures could then begin
 * unseen, so the shim must go back to asking the driver, at every stream-ordered call, whether
 * its stream is being captured: run with NULLCUDA_REPORT_CAPTURE_QUERIES=1, the one async pair
 * after the lookup makes queries.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

int main(void) {
    CUdevice device;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
    CHECK(cuCtxSetCurrent(ctx));
    CUdriverProcAddressQueryResult st;
    void *begin_v3 = NULL;
    CHECK(cuGetProcAddress_v2("cuStreamBeginCapture", &begin_v3, 99000, 0, &st));
    if (!begin_v3)
        return 95;
    CUdeviceptr d = 0;
    CHECK(cuMemAllocAsync(&d, 4096, NULL));
    CHECK(cuMemFreeAsync(d, NULL));
    printf("async pair after an unknown capture form\n");
    return 0;
}
