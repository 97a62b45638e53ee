// service.h: what the handle programs here share — the status check, the mode argument and a
// fill kernel. Every CUDA and library status type (cudaError_t, cublasStatus_t, cufftResult,
// curandStatus_t, cudnnStatus_t, cusolverStatus_t) means success by 0, so one check serves all;
// a failure prints where and exits 1, so a program that says "done" ran every call successfully.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        long s_ = (long)(x);                                                                       \
        if (s_ != 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s returned %ld\n", __FILE__, __LINE__, #x, s_);              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// leak: a handle per request, never destroyed. one: one handle for the process, never
// destroyed (held, not a leak). clean: a handle per request, destroyed.
enum class Mode { leak, one, clean };

static inline Mode parse_mode(int argc, char **argv) {
    const char *m = argc > 1 ? argv[1] : "";
    if (strcmp(m, "leak") == 0) return Mode::leak;
    if (strcmp(m, "one") == 0) return Mode::one;
    if (strcmp(m, "clean") == 0) return Mode::clean;
    fprintf(stderr, "usage: %s leak|one|clean\n", argv[0]);
    exit(2);
}

static inline const char *mode_name(Mode m) {
    return m == Mode::leak ? "leak" : m == Mode::one ? "one" : "clean";
}

__global__ void fill_kernel(float *p, size_t n, float v) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}

static inline void fill(float *p, size_t n, float v) {
    fill_kernel<<<(unsigned)((n + 255) / 256), 256>>>(p, n, v);
    CK(cudaGetLastError());
}
