// libplan.cu — builds libplan.so. The leak is here, inside a shared library, not in the program:
// plan_destroy frees the Plan struct but forgets the device workspace plan_create allocated.
#include <cstdio>
#include <cuda_runtime.h>
#include "plan.h"

struct Plan {
    size_t n;
    float *d_workspace;
};

__global__ void twiddle(float *w, size_t n) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) w[i] = float(i % 7);
}

Plan *plan_create(size_t n) {
    Plan *plan = new Plan{n, nullptr};
    if (cudaMalloc(&plan->d_workspace, n * sizeof(float)) != cudaSuccess) { // LEAK-HERE
        delete plan;
        return nullptr;
    }
    return plan;
}

int plan_execute(Plan *plan) {
    twiddle<<<unsigned((plan->n + 255) / 256), 256>>>(plan->d_workspace, plan->n);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

void plan_destroy(Plan *plan) {
    // Bug: cudaFree(plan->d_workspace) is missing.
    delete plan;
}
