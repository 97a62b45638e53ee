// signal_loop: keeps one 3000-byte block, prints "ready", then loops until a signal ends it
// (scripts/gpu-signals.sh, issue 21): `alloc` cudaMalloc/cudaFree of 64 KiB with a kernel between
// (the shim's locks held often), `malloc` host malloc/free (the arena lock held often; run with
// MALLOC_ARENA_MAX=1).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void touch(char *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "alloc";
    void *kept;
    if (cudaMalloc(&kept, 3000) != cudaSuccess) return 99;
    printf("ready\n");
    fflush(stdout);
    if (strcmp(mode, "alloc") == 0) {
        for (;;) {
            char *p;
            if (cudaMalloc(&p, 64 << 10) != cudaSuccess) return 98;
            touch<<<64, 1024>>>(p, 64 << 10);
            cudaFree(p);
        }
    }
    for (unsigned i = 0;; i++) {
        void *p = malloc(16 + (i % 64) * 48);
        __asm__ volatile("" ::"g"(p) : "memory");
        free(p);
    }
}
