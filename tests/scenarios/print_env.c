/* print_env: prints the allocator variables of PyTorch and JAX/XLA as it received them, one
 * `NAME=value` line each (`NAME unset` when absent), then allocates and frees one block so its
 * dump is not a quiet one. Exits 0.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

static const char *const NAMES[] = {
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
};

int main(void) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        const char *v = getenv(NAMES[i]);
        if (v)
            printf("%s=%s\n", NAMES[i], v);
        else
            printf("%s unset\n", NAMES[i]);
    }
    CHECK(cuInit(0));
    CUdeviceptr block = 0;
    CHECK(cuMemAlloc_v2(&block, 512));
    CHECK(cuMemFree_v2(block));
    return 0;
}
