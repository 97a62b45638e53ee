// async_pool.cu — stream-ordered allocation: cudaMallocAsync / cudaFreeAsync on a stream (the
// memory pool underneath keeps freed memory for reuse; that reuse is not a leak). An accumulator
// and seven chunks are allocated; the last chunk takes a branch that forgets cudaFreeAsync.
//
// The report must show ONE leaked stream-ordered allocation of 2 MiB (2 097 152 bytes) via
// cudaMallocAsync (kind async) in process_chunks at the line marked LEAK-HERE; the six other
// chunks and the accumulator were freed.
//
// EXPECT: summary allocations=8 frees=7 live_allocations=1 live_bytes=2097152 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=LEAK-HERE count=1 bytes=2097152 api=cudaMallocAsync kind=async function=process_chunks
#include "check.h"

const int CHUNK = 1 << 19; // floats: 2 MiB

__global__ void accumulate(const float *in, float *sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(sum, in[i]);
}

void process_chunks(cudaStream_t stream, float *d_sum, int chunks) {
    for (int c = 0; c < chunks; c++) {
        float *d_chunk;
        CHECK(cudaMallocAsync(&d_chunk, CHUNK * sizeof(float), stream)); // LEAK-HERE
        CHECK(cudaMemsetAsync(d_chunk, 0, CHUNK * sizeof(float), stream));
        accumulate<<<(CHUNK + 255) / 256, 256, 0, stream>>>(d_chunk, d_sum, CHUNK);
        CHECK(cudaGetLastError());
        bool last = c == chunks - 1;
        if (last) continue; // "the tail chunk is handled elsewhere" — and never freed
        CHECK(cudaFreeAsync(d_chunk, stream));
    }
}

int main() {
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    float *d_sum;
    CHECK(cudaMallocAsync(&d_sum, sizeof(float), stream));
    CHECK(cudaMemsetAsync(d_sum, 0, sizeof(float), stream));
    process_chunks(stream, d_sum, 7);
    CHECK(cudaFreeAsync(d_sum, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaStreamDestroy(stream));
    std::printf("async_pool: 7 chunks processed\n");
    return 0;
}
