// cudnn_service: a request handler that makes a cuDNN handle per request. argv[1] = leak | one |
// clean. Each of 20 requests binds its handle to the service's stream and reads it back.
//   leak   handle_request makes a handle at the `// LEAK` line and never calls cudnnDestroy.
//          Expected under `cudaleak run`: exit 23, a row of 20 cuDNN handles never destroyed at
//          that line.
//   one    main makes one handle that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its handle: exit 0.
// cuDNN may ship only inside a Python wheel (site-packages/nvidia/cudnn), whose lib folder has
// libcudnn.so.9 but no libcudnn.so; scripts/gpu-handles.sh finds the include and lib folders,
// links through a libcudnn.so link to libcudnn.so.9 and sets the rpath. By hand on a GPU machine
// (D = that cudnn folder, L = a folder holding libcudnn.so -> $D/lib/libcudnn.so.9):
//   nvcc -g -lineinfo -arch=sm_90 -I$D/include -L$L -Xlinker -rpath,$D/lib -o cudnn_service
//       tests/gpu/handles/cudnn_service.cu -lcudnn
//   cudaleak run -- ./cudnn_service leak
#include "service.h"
#include <cudnn.h>

constexpr int REQUESTS = 20;
static cudaStream_t stream;

static void serve(cudnnHandle_t h, int i) {
    CK(cudnnSetStream(h, stream));
    cudaStream_t got = nullptr;
    CK(cudnnGetStream(h, &got));
    if (got != stream) {
        fprintf(stderr, "cudnn_service: request %d: the handle's stream did not stick\n", i);
        exit(1);
    }
    CK(cudaStreamSynchronize(stream));
}

static void handle_request(int i, bool destroy) {
    cudnnHandle_t h;
    CK(cudnnCreate(&h)); // LEAK
    serve(h, i);
    if (destroy)
        CK(cudnnDestroy(h));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    CK(cudaStreamCreate(&stream));
    if (mode == Mode::one) {
        cudnnHandle_t h;
        CK(cudnnCreate(&h)); // ONE: the process's handle, never destroyed
        for (int i = 0; i < REQUESTS; ++i)
            serve(h, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    printf("cudnn_service %s: %d requests (cuDNN %zu), done\n", mode_name(mode), REQUESTS,
           cudnnGetVersion());
    return 0;
}
