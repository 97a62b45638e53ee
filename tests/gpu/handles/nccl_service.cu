// nccl_service: a request handler that makes a one-rank NCCL communicator per request (a
// single-GPU job can make one: nranks 1). argv[1] = leak | one | clean. Each of 10 requests
// all-reduces a buffer of 1M floats through its communicator and checks the sum.
//   leak   handle_request makes a communicator at the `// LEAK` line and never destroys it.
//          Expected under `cudaleak run`: exit 23, a row of 10 NCCL communicators never
//          destroyed at that line.
//   one    main makes one communicator that every request uses, never destroyed: held, exit 0.
//   clean  as leak, but each request destroys its communicator: exit 0.
// NCCL may ship only inside a Python wheel (site-packages/nvidia/nccl, libnccl.so.2 and no
// libnccl.so); scripts/gpu-handles.sh finds it as it finds cuDNN.
#include "service.h"
#include <nccl.h>

constexpr int REQUESTS = 10;
constexpr size_t N = 1 << 20;
static cudaStream_t stream;
static float *buf;

static void serve(ncclComm_t comm, int i) {
    fill(buf, N, float(i));
    CK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, comm, stream));
    float first = -1;
    CK(cudaMemcpyAsync(&first, buf, sizeof first, cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
    if (first != float(i)) {
        fprintf(stderr, "nccl_service: request %d: all-reduce of one rank gave %f\n", i, first);
        exit(1);
    }
}

static ncclComm_t make_comm() {
    ncclUniqueId id;
    CK(ncclGetUniqueId(&id));
    ncclComm_t comm;
    CK(ncclCommInitRank(&comm, 1, id, 0)); // LEAK
    return comm;
}

static void handle_request(int i, bool destroy) {
    ncclComm_t comm = make_comm();
    serve(comm, i);
    if (destroy)
        CK(ncclCommDestroy(comm));
}

int main(int argc, char **argv) {
    Mode mode = parse_mode(argc, argv);
    CK(cudaStreamCreate(&stream));
    CK(cudaMalloc(&buf, N * sizeof(float)));
    if (mode == Mode::one) {
        ncclComm_t comm = make_comm();
        for (int i = 0; i < REQUESTS; ++i)
            serve(comm, i);
    } else {
        for (int i = 0; i < REQUESTS; ++i)
            handle_request(i, mode == Mode::clean);
    }
    CK(cudaFree(buf));
    int version = 0;
    CK(ncclGetVersion(&version));
    printf("nccl_service %s: %d requests (NCCL %d), done\n", mode_name(mode), REQUESTS, version);
    return 0;
}
