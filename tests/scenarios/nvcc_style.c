/* nvcc_style: the host code `nvcc -cudart shared` generates for one kernel, written by hand:
 * fat binary registration from a constructor, the kernel stub's push/pop of the launch
 * configuration, __cudaGetKernel + __cudaLaunchKernel, and one leaked cudaMalloc.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

static void **fatbin_handle;
static const unsigned char fake_fatbin[16] = {0x50, 0xed, 0x55, 0xba};

static void kernel_stub(float *out, int n);

static void unregister(void) { __cudaUnregisterFatBinary(fatbin_handle); }

__attribute__((constructor)) static void register_module(void) {
    fatbin_handle = __cudaRegisterFatBinary((void *)fake_fatbin);
    __cudaRegisterFunction(fatbin_handle, (const char *)kernel_stub, (char *)"_Z6kernelPfi", "_Z6kernelPfi",
                           -1, NULL, NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(fatbin_handle);
    atexit(unregister);
}

/* What `kernel<<<grid, block>>>(out, n)` lowers to in CUDA 13. */
static void kernel_stub(float *out, int n) {
    void *args[] = {&out, &n};
    dim3 grid, block;
    size_t shared;
    void *stream;
    if (__cudaPopCallConfiguration(&grid, &block, &shared, &stream) != 0)
        return;
    static cudaKernel_t handle;
    if (!handle)
        __cudaGetKernel(&handle, (const void *)kernel_stub);
    __cudaLaunchKernel(handle, grid, block, args, shared, (cudaStream_t)stream);
}

static float *buffer;

SITE void alloc_buffer(void) {
    CHECK(cudaMalloc((void **)&buffer, 256 * sizeof(float))); // @nvcc_alloc
    KEEP(buffer);
}

int main(void) {
    alloc_buffer();
    dim3 grid = {1, 1, 1}, block = {256, 1, 1};
    if (__cudaPushCallConfiguration(grid, block, 0, NULL) == 0)
        kernel_stub(buffer, 256);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    float host[4] = {0};
    CHECK(cudaMemcpy(host, buffer, sizeof host, cudaMemcpyDeviceToHost));
    printf("kernel launched, %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
