// vmm_pool.cu — a pool that grows by mapping physical chunks into a reserved address range, the
// way PyTorch's expandable segments and JAX do (driver API: cuMemAddressReserve, cuMemCreate,
// cuMemMap). A chunk's handle may be released right after mapping: its memory lives until the
// chunk is unmapped. Memory is counted once: the reservation is address space, a mapping is
// its chunk's memory.
//
// Two 2 MiB chunks are created, mapped side by side and released at once. Shutdown unmaps only
// the first chunk and never frees the reservation. The report must show TWO leaks holding 2 MiB
// of memory in all: the 8 MiB reservation (8 388 608 bytes of address space, no memory) via
// cuMemAddressReserve in reserve_range at RESERVE-HERE, and the second chunk's 2 MiB mapping
// (it holds the released chunk's memory) via cuMemMap in map_chunk at MAP-HERE.
//
// BUILD: -lcuda
// EXPECT: summary allocations=5 frees=3 live_allocations=2 live_bytes=2097152 peak_live_bytes=4194304 bytes_allocated=4194304 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=RESERVE-HERE count=1 bytes=8388608 api=cuMemAddressReserve kind=reserved function=reserve_range
// EXPECT: leak marker=MAP-HERE count=1 bytes=2097152 api=cuMemMap kind=mapped function=map_chunk
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>

#define CU_CHECK(call)                                                                     \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                          \
            std::fprintf(stderr, "%s:%d: %s failed with CUresult %d\n", __FILE__, __LINE__, \
                         #call, int(r_));                                                  \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

const size_t CHUNK = 2 << 20;

CUdeviceptr reserve_range(size_t bytes) {
    CUdeviceptr base;
    CU_CHECK(cuMemAddressReserve(&base, bytes, 0, 0, 0)); // RESERVE-HERE
    return base;
}

void map_chunk(CUdeviceptr at, const CUmemAllocationProp &prop) {
    CUmemGenericAllocationHandle chunk;
    CU_CHECK(cuMemCreate(&chunk, CHUNK, &prop, 0));
    CU_CHECK(cuMemMap(at, CHUNK, 0, chunk, 0)); // MAP-HERE
    CU_CHECK(cuMemRelease(chunk)); // the mapping keeps the memory
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_CHECK(cuMemSetAccess(at, CHUNK, &access, 1));
}

int main() {
    CUdevice dev;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CU_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (CHUNK % gran != 0) {
        std::fprintf(stderr, "granularity %zu does not divide %zu\n", gran, CHUNK);
        return 1;
    }
    CUdeviceptr base = reserve_range(4 * CHUNK);
    map_chunk(base, prop);
    map_chunk(base + CHUNK, prop);
    CU_CHECK(cuMemsetD8(base, 0x5a, CHUNK));
    CU_CHECK(cuMemsetD8(base + CHUNK, 0xa5, CHUNK));
    CU_CHECK(cuCtxSynchronize());
    // Shutdown forgets the second chunk and the reservation.
    CU_CHECK(cuMemUnmap(base, CHUNK));
    std::printf("vmm_pool: 2 chunks mapped, 1 unmapped\n");
    return 0;
}
