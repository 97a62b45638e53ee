/* runtime_kinds: cudaHostRegister, cudaIpcOpenMemHandle and cudaMemPoolImportPointer through a
 * program linked against libcudart.so.13. The exporters' blocks (8400 and 8500 bytes) are
 * freed in every mode; `runtime_kinds leak` leaves the 3 records live, `runtime_kinds free`
 * undoes each with cudaHostUnregister, cudaIpcCloseMemHandle and cudaFreeAsync (an imported pool
 * pointer is freed like any pool allocation).
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

#include <string.h>

static char buffer[7300];
static void *src1, *src2, *opened, *imported;
static cudaMemPool_t pool;

SITE void register_host(void) {
    CHECK(cudaHostRegister(buffer, sizeof buffer, cudaHostRegisterDefault)); // @cudaHostRegister
    KEEP(buffer);
}
SITE void open_handle(cudaIpcMemHandle_t h) {
    CHECK(cudaIpcOpenMemHandle(&opened, h, cudaIpcMemLazyEnablePeerAccess)); // @cudaIpcOpenMemHandle
    KEEP(opened);
}
SITE void import_pointer(cudaMemPoolPtrExportData *data) {
    CHECK(cudaMemPoolImportPointer(&imported, pool, data)); // @cudaMemPoolImportPointer
    KEEP(imported);
}

int main(int argc, char **argv) {
    int do_free = argc > 1 && strcmp(argv[1], "free") == 0;
    cudaIpcMemHandle_t h;
    cudaMemPoolPtrExportData data;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMalloc(&src1, 8400));
    CHECK(cudaMalloc(&src2, 8500));
    CHECK(cudaIpcGetMemHandle(&h, src1));
    CHECK(cudaMemPoolExportPointer(&data, src2));
    register_host();
    open_handle(h);
    import_pointer(&data);
    CHECK(cudaMemset(opened, 1, 8400));
    CHECK(cudaFree(src1));
    CHECK(cudaFree(src2));
    if (do_free) {
        CHECK(cudaHostUnregister(buffer));
        CHECK(cudaIpcCloseMemHandle(opened));
        CHECK(cudaFreeAsync(imported, NULL));
        printf("freed 3\n");
    } else {
        printf("leaked 3\n");
    }
    return 0;
}
