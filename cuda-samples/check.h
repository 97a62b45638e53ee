// check.h — the one helper every sample shares: stop on an unexpected CUDA error.
//
// It must never hide an error the sample is about (failed_allocation and double_free inspect
// those return codes themselves) and never allocate.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,      \
                         cudaGetErrorString(err_));                                        \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)
