// ab: the shim's recording cost measured inside one process, which cancels the driver's
// run-to-run drift that dominates comparisons between separate runs. Rounds alternate with
// recording on and off (cudaleak_set_recording); each round is timed; prints the median round of
// each and their ratio. Must run under the shim. GPU benchmark (scripts/gpu-bench.sh).
//
//   ab batch|sync|kernel [ROUNDS]
//   batch:  10 000 live 4 KiB cudaMalloc, then cudaFree of all, per round
//   sync:   200 synchronous 1 MiB cudaMalloc + cudaFree pairs per round
//   kernel: 100 iterations of one 4 MiB cudaMalloc, 12 kernels, sync, cudaFree per round
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <vector>
#include <cuda_runtime.h>

__global__ void axpb(float *x, int n, float a, float b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void batch(std::vector<void *> &p) {
    for (auto &q : p)
        if (cudaMalloc(&q, 4096) != cudaSuccess) exit(1);
    for (auto q : p)
        if (cudaFree(q) != cudaSuccess) exit(1);
}

static void sync_pairs() {
    for (int i = 0; i < 200; i++) {
        void *q;
        if (cudaMalloc(&q, 1 << 20) != cudaSuccess || cudaFree(q) != cudaSuccess) exit(1);
    }
}

static void kernels() {
    const int n = 1 << 20;
    for (int it = 0; it < 100; it++) {
        float *x;
        if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) exit(1);
        cudaMemsetAsync(x, 0, n * sizeof(float));
        for (int k = 0; k < 12; k++) axpb<<<(n + 255) / 256, 256>>>(x, n, 1.0001f, 0.5f);
        if (cudaDeviceSynchronize() != cudaSuccess || cudaFree(x) != cudaSuccess) exit(1);
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int rounds = argc > 2 ? atoi(argv[2]) : 40;
    auto set = (int (*)(int))dlsym(RTLD_DEFAULT, "cudaleak_set_recording");
    if (!set) {
        fprintf(stderr, "ab: not running under libcudaleak.so\n");
        return 2;
    }
    std::vector<void *> p(10000);
    if (cudaFree(nullptr) != cudaSuccess) return 1;
    std::vector<double> on, off;
    for (int r = -2; r < rounds; r++) { // two untimed warm-up rounds
        bool recording = r % 2 == 0;
        set(recording);
        double t0 = now();
        if (!strcmp(argv[1], "batch")) batch(p);
        else if (!strcmp(argv[1], "sync")) sync_pairs();
        else kernels();
        double s = now() - t0;
        if (r >= 0) (recording ? on : off).push_back(s);
    }
    set(1);
    double a = median(on), b = median(off);
    printf("round_on_s %.6f\nround_off_s %.6f\nratio %.4f\n", a, b, a / b);
    return 0;
}
