/* framework_caches: what a PyTorch program leaves at exit, through stand-ins of libcublas.so.13
 * and libc10_cuda.so (tests/frameworks): a cuBLAS handle (1 MiB + 4 KiB workspace, cuMemAlloc_v2
 * from unsymbolised frames under cublasCreate_v2), two 2 MiB caching-allocator segments
 * (cudaMalloc from DeviceCachingAllocator::alloc_block) and one 1 MiB cudaMallocAsync tensor
 * (CudaMallocAsync::mallocAsync). All held by caches: nothing is a leak.
 * With the argument `leak` it also leaks three blocks of its own: 4096 bytes from cudaMalloc in
 * user_leak; 8192 from user_hook, which the caching allocator calls to allocate (user code
 * below alloc_block on the stack); 16384 from cublasAlloc (cuBLAS hands that block to its
 * caller). Prints "done" and exits 0 either way.
 * build: -lcudart -lcuda -lcublas -lc10_cuda */
#include "nullcuda.h"
#include "nullcudart.h"
#include "scenario.h"

#include <string.h>

int cublasCreate_v2(void **handle);
int cublasAlloc(int n, int elem_size, void **device_ptr);
void *c10_cuda_malloc(size_t size, void *(*hook)(size_t));
void *c10_cuda_malloc_async(size_t size);

static void *kept[8];

SITE void user_leak(void) {
    CHECK(cudaMalloc(&kept[0], 4096)); // @user_leak
    KEEP(kept[0]);
}

SITE void *user_hook(size_t size) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, size)); // @user_hook
    KEEP(p);
    return p;
}

SITE void user_owned(void) {
    CHECK(cublasAlloc(16, 1024, &kept[1])); // @user_owned
    KEEP(kept[1]);
}

int main(int argc, char **argv) {
    CHECK(cuInit(0));
    void *handle = NULL;
    CHECK(cublasCreate_v2(&handle));
    kept[2] = c10_cuda_malloc(2 << 20, NULL);
    kept[3] = c10_cuda_malloc(2 << 20, NULL);
    kept[4] = c10_cuda_malloc_async(1 << 20);
    if (!kept[2] || !kept[3] || !kept[4])
        return 98;
    if (argc > 1 && strcmp(argv[1], "leak") == 0) {
        user_leak();
        kept[5] = c10_cuda_malloc(8192, user_hook);
        user_owned();
    }
    KEEP(handle);
    printf("done\n");
    return 0;
}
