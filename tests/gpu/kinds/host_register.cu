// host_register: page-locked host memory the program registered itself. argv[1] = leak | clean.
// 8 MiB from malloc, registered with cudaHostRegister and used for a copy; `clean` unregisters
// it before freeing, `leak` leaves it registered (the pinned pages stay locked until exit).
// Expected: leak → 1 live block of kind registered, 8388608 bytes; clean → none.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    bool leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    size_t bytes = 8 << 20;
    char *host = (char *)malloc(bytes);
    memset(host, 1, bytes);
    CHECK(cudaHostRegister(host, bytes, cudaHostRegisterDefault)); // LEAK-HERE
    void *dev;
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaFree(dev));
    if (!leak) {
        CHECK(cudaHostUnregister(host));
        free(host);
    }
    printf("host_register: %s\n", leak ? "left registered" : "clean");
    return 0;
}
