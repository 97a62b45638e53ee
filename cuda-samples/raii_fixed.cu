// raii_fixed.cu — the tutorial's fix for leak_error_path.cu: an RAII device buffer whose destructor
// calls cudaFree, so every way out of process_data releases the memory, the early return included.
//
// Same inputs as leak_error_path.cu (three calls, the second rejected). The report must show
// NOTHING: three allocations, three frees, nothing live.
//
// EXPECT: summary allocations=3 frees=3 live_allocations=0 live_bytes=0 failed_allocations=0 invalid_frees=0
#include "check.h"

const int N = 1 << 20;

// Owns one device allocation; not copyable, so it cannot be freed twice.
template <typename T>
class DeviceBuffer {
  public:
    explicit DeviceBuffer(size_t count) : count_(count) { CHECK(cudaMalloc(&ptr_, count * sizeof(T))); }
    ~DeviceBuffer() { cudaFree(ptr_); } // runs on every exit path
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    T *get() const { return ptr_; }
    size_t bytes() const { return count_ * sizeof(T); }

  private:
    T *ptr_ = nullptr;
    size_t count_;
};

__global__ void normalize(float *d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = d[i] / float(n);
}

bool process_data(float *h_data) {
    DeviceBuffer<float> d_data(N);
    CHECK(cudaMemcpy(d_data.get(), h_data, d_data.bytes(), cudaMemcpyHostToDevice));

    if (h_data[0] < 0.0f) {
        std::fprintf(stderr, "process_data: invalid input, skipping\n");
        return false; // ~DeviceBuffer frees d_data here too
    }

    normalize<<<(N + 255) / 256, 256>>>(d_data.get(), N);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h_data, d_data.get(), d_data.bytes(), cudaMemcpyDeviceToHost));
    return true;
}

int main() {
    static float h_data[N];
    int ok = 0;
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < N; i++) h_data[i] = float(i);
        if (run == 1) h_data[0] = -1.0f;
        ok += process_data(h_data);
    }
    std::printf("raii_fixed: %d of 3 inputs processed\n", ok);
    return 0;
}
