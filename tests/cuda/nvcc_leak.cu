// nvcc_leak.cu: a real nvcc -cudart shared build against the null runtime. One kernel launch,
// one freed cudaMalloc, one leaked cudaMalloc and one leaked cudaMallocAsync (cudaMallocAsync_ptsz
// when built with --default-stream per-thread). Expected: 2 live blocks, 1024 + 4096 bytes.
#include <cstdio>

__global__ void fill(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = 1.0f;
}

__device__ int counter;

__attribute__((noinline)) float *leak_buffer(size_t n) {
    float *d = nullptr;
    // (void **): the C entry point itself, not the cuda_runtime.h template around it.
    cudaMalloc((void **)&d, n * sizeof(float)); // @nvcc_leak
    __asm__ volatile("" ::"g"(d) : "memory");
    return d;
}

__attribute__((noinline)) void *leak_async(cudaStream_t s) {
    void *a = nullptr;
    cudaMallocAsync(&a, 4096, s); // @nvcc_async
    __asm__ volatile("" ::"g"(a) : "memory");
    return a;
}

int main() {
    float *tmp = nullptr;
    cudaMalloc(&tmp, 512);
    fill<<<1, 128>>>(tmp, 128);
    cudaDeviceSynchronize();
    cudaFree(tmp);
    int one = 1;
    cudaMemcpyToSymbol(counter, &one, sizeof one);
    float *d = leak_buffer(256);
    cudaStream_t s;
    cudaStreamCreate(&s);
    leak_async(s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    printf("nvcc_leak: %s, %s\n", cudaGetErrorString(cudaGetLastError()), d != nullptr ? "ok" : "null");
    return 0;
}
