// scratch_leak: a thrust::device_vector made with `new` and never deleted, three times (4 MiB
// each). Expected under `cudaleak run`: one leak group of 3 allocations (12 MiB) whose first
// frame shown is make_scratch at the `// LEAK` line, thrust's template frames folded into one
// line above it (`--native` shows them). Built and run by hand on a GPU machine:
//   nvcc -g -o scratch_leak tests/gpu/thrust/scratch_leak.cu && cudaleak run -- ./scratch_leak
#include <cstdio>
#include <thrust/device_vector.h>

static thrust::device_vector<float>* make_scratch(size_t n) {
    return new thrust::device_vector<float>(n);  // LEAK
}

int main() {
    for (int i = 0; i < 3; ++i) {
        make_scratch(1 << 20);
    }
    std::printf("scratch_leak: 3 scratch vectors\n");
    return 0;
}
