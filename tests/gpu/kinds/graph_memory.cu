// graph_memory: CUDA graph memory nodes on a real GPU. argv[1] = leak | clean.
//  - an explicit allocation node (cudaGraphAddMemAllocNode, 64 MiB) in a graph launched 8
//    times, each launch's memory freed with cudaFreeAsync — except, in `leak` mode, the last;
//  - a stream capture of cudaMallocAsync (32 MiB) freed inside the capture (nothing left) and of
//    one (16 MiB) freed inside only in `clean` mode.
// `leak` leaves 64 MiB (the node's line) + 16 MiB (the captured line); `clean` nothing.
// Expected by scripts/gpu-kinds.sh: the EXPECT line below.
// EXPECT leak: live=2/83886080B   EXPECT clean: live=0/0B
#include <cstdio>
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

__global__ void fill(float *p, size_t n, float v) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

static int explicit_node(cudaStream_t s, bool leak) {
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = 64 << 20;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddMemAllocNode(&node, g, nullptr, 0, &p)); // LEAK-HERE (explicit node)
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    for (int i = 0; i < 8; i++) {
        CHECK(cudaGraphLaunch(e, s));
        fill<<<(16 << 20) / 256, 256, 0, s>>>((float *)p.dptr, 16 << 20, i);
        if (i < 7 || !leak)
            CHECK(cudaFreeAsync(p.dptr, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    return 0;
}

static int captured(cudaStream_t s, bool leak) {
    float *tmp = nullptr, *kept = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync((void **)&tmp, 32 << 20, s));
    CHECK(cudaMallocAsync((void **)&kept, 16 << 20, s)); // LEAK-HERE (captured)
    fill<<<(8 << 20) / 256, 256, 0, s>>>(tmp, 8 << 20, 1.0f);
    fill<<<(4 << 20) / 256, 256, 0, s>>>(kept, 4 << 20, 2.0f);
    CHECK(cudaFreeAsync(tmp, s));
    if (!leak)
        CHECK(cudaFreeAsync(kept, s));
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(e));
    CHECK(cudaGraphDestroy(g));
    return 0;
}

int main(int argc, char **argv) {
    bool leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    if (explicit_node(s, leak) || captured(s, leak))
        return 1;
    CHECK(cudaStreamDestroy(s));
    printf("graph_memory: %s\n", leak ? "left 64 MiB + 16 MiB" : "clean");
    return 0;
}
