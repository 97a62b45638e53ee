/* runtime.c: the null-device libcudart.so.13.
 *
 * Owns: the runtime API over the null driver, reached exactly the way real cudart 12/13 reaches
 * libcuda: dlopen("libcuda.so.1", RTLD_NOW), dlsym(handle, "cuGetProcAddress_v2") (the only cu*
 * symbol bound by name), then base-name lookups through the returned cuGetProcAddress_v2
 * pointer, whose results it calls from then on. Also the glue nvcc-generated host code imports
 * (kernels are no-ops). Must never: call a cu* function by its ELF name, or keep its own table
 * of allocations (the driver is the one source of truth). */
#define _GNU_SOURCE
#include "nullcuda.h"
#include "nullcudart.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDART_VERSION 13000

/* Every driver entry point the runtime uses, as cuGetProcAddress returned it. */
static struct {
    PFN_cuGetProcAddress_v2 getProcAddress;
    PFN_cuInit init;
    CUresult (*driverGetVersion)(int *);
    PFN_cuMemAlloc memAlloc;
    PFN_cuMemAllocPitch memAllocPitch;
    PFN_cuMemFree memFree;
    PFN_cuMemAllocManaged memAllocManaged;
    PFN_cuMemHostAlloc memHostAlloc;
    PFN_cuMemFreeHost memFreeHost;
    PFN_cuMemAllocAsync memAllocAsync, memAllocAsync_ptsz;
    CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*ctxSetCurrent)(CUcontext);
    PFN_cuMemAllocFromPoolAsync memAllocFromPoolAsync, memAllocFromPoolAsync_ptsz;
    PFN_cuMemFreeAsync memFreeAsync, memFreeAsync_ptsz;
    PFN_cuArrayCreate arrayCreate;
    PFN_cuArray3DCreate array3DCreate;
    PFN_cuArrayDestroy arrayDestroy;
    PFN_cuMemCreate memCreate;
    PFN_cuMemRelease memRelease;
    PFN_cuMemGetInfo memGetInfo;
    PFN_cuCtxSynchronize ctxSynchronize;
    PFN_cuDeviceGetDefaultMemPool deviceGetDefaultMemPool;
    /* Registered host memory and IPC (issue 12). */
    PFN_cuMemHostRegister memHostRegister;
    PFN_cuMemHostUnregister memHostUnregister;
    PFN_cuIpcGetMemHandle ipcGetMemHandle;
    PFN_cuIpcOpenMemHandle ipcOpenMemHandle;
    PFN_cuIpcCloseMemHandle ipcCloseMemHandle;
    PFN_cuMemPoolExportPointer memPoolExportPointer;
    PFN_cuMemPoolImportPointer memPoolImportPointer;
} drv;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t init_error = cudaErrorInitializationError;
static __thread cudaError_t last_error;
static __thread int current_device;

static cudaError_t translate(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS:
        return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
        return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED:
        return cudaErrorCudartUnloading;
    case CUDA_ERROR_NO_DEVICE:
        return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
        return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT:
        return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_INVALID_HANDLE:
        return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_NOT_FOUND:
        return cudaErrorNotFound;
    default:
        return cudaErrorUnknown;
    }
}

static cudaError_t set_error(cudaError_t e) {
    if (e != cudaSuccess)
        last_error = e;
    return e;
}

static int lookup(const char *name, int version, cuuint64_t flags, void **fn) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *found = NULL; /* `fn` may be &drv.getProcAddress itself */
    CUresult r = drv.getProcAddress(name, &found, version, flags, &status);
    *fn = found;
    return r == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && found ? 0 : -1;
}

#define LOOKUP(field, name, version, flags) ok &= lookup(name, version, flags, (void **)&drv.field) == 0

static void init_driver(void) {
    void *handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (!handle) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    PFN_cuGetProcAddress_v2 gpa = (PFN_cuGetProcAddress_v2)dlsym(handle, "cuGetProcAddress_v2");
    if (!gpa) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    /* The bootstrap sequence real cudart 12.9/13.0 makes. */
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    gpa("", &fn, 0, 0, &status);
    drv.getProcAddress = gpa;
    int ok = 1;
    LOOKUP(init, "cuInit", 2000, 0);
    gpa("cuGetProcAddress", &fn, 11030, 0, &status);
    LOOKUP(getProcAddress, "cuGetProcAddress", 12000, 0);
    if (!ok) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    LOOKUP(driverGetVersion, "cuDriverGetVersion", 2020, 0);
    LOOKUP(memAlloc, "cuMemAlloc", 3020, 0);
    LOOKUP(memAllocPitch, "cuMemAllocPitch", 3020, 0);
    LOOKUP(memFree, "cuMemFree", 3020, 0);
    LOOKUP(memAllocManaged, "cuMemAllocManaged", 6000, 0);
    LOOKUP(memHostAlloc, "cuMemHostAlloc", 2020, 0);
    LOOKUP(memFreeHost, "cuMemFreeHost", 2000, 0);
    LOOKUP(memAllocAsync, "cuMemAllocAsync", 11020, 0);
    LOOKUP(primaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0);
    LOOKUP(ctxSetCurrent, "cuCtxSetCurrent", 4000, 0);
    LOOKUP(memAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0);
    LOOKUP(memFreeAsync, "cuMemFreeAsync", 11020, 0);
    LOOKUP(memAllocAsync_ptsz, "cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    LOOKUP(memAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020,
           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    LOOKUP(memFreeAsync_ptsz, "cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    LOOKUP(arrayCreate, "cuArrayCreate", 3020, 0);
    LOOKUP(array3DCreate, "cuArray3DCreate", 3020, 0);
    LOOKUP(arrayDestroy, "cuArrayDestroy", 2000, 0);
    LOOKUP(memCreate, "cuMemCreate", 10020, 0);
    LOOKUP(memRelease, "cuMemRelease", 10020, 0);
    LOOKUP(memGetInfo, "cuMemGetInfo", 3020, 0);
    LOOKUP(ctxSynchronize, "cuCtxSynchronize", 2000, 0);
    LOOKUP(deviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, 0);
    LOOKUP(memHostRegister, "cuMemHostRegister", 6050, 0);
    LOOKUP(memHostUnregister, "cuMemHostUnregister", 4000, 0);
    LOOKUP(ipcGetMemHandle, "cuIpcGetMemHandle", 4010, 0);
    LOOKUP(ipcOpenMemHandle, "cuIpcOpenMemHandle", 11000, 0);
    LOOKUP(ipcCloseMemHandle, "cuIpcCloseMemHandle", 4010, 0);
    LOOKUP(memPoolExportPointer, "cuMemPoolExportPointer", 11020, 0);
    LOOKUP(memPoolImportPointer, "cuMemPoolImportPointer", 11020, 0);
    if (!ok) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    init_error = translate(drv.init(0));
}

static void init_once_fn(void) {
    int saved = errno; /* dlopen may leave errno set; the program must not see it */
    init_driver();
    errno = saved;
}

/* Lazily binds the driver; returns its error for every call when that failed. */
static cudaError_t ensure_init(void) {
    pthread_once(&init_once, init_once_fn);
    return init_error;
}

#define INIT_OR_RETURN()                                                                         \
    do {                                                                                         \
        cudaError_t e_ = ensure_init();                                                          \
        if (e_ != cudaSuccess)                                                                   \
            return set_error(e_);                                                                \
    } while (0)

#define DRV(call) set_error(translate(call))

/* ---- allocation ---- */

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
    INIT_OR_RETURN();
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr d = 0;
    cudaError_t e = DRV(drv.memAlloc(&d, size));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    cudaError_t e = DRV(drv.memAllocManaged(&d, size, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    return DRV(drv.memHostAlloc(pHost, size, flags));
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size) {
    INIT_OR_RETURN();
    return DRV(drv.memHostAlloc(ptr, size, 0));
}

EXPORT cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
    INIT_OR_RETURN();
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    cudaError_t e = DRV(drv.memAllocPitch(&d, pitch, width, height, 4));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr *pitchedDevPtr, cudaExtent extent) {
    INIT_OR_RETURN();
    if (!pitchedDevPtr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    size_t pitch = 0;
    size_t rows = (extent.height ? extent.height : 1) * (extent.depth ? extent.depth : 1);
    cudaError_t e = DRV(drv.memAllocPitch(&d, &pitch, extent.width, rows, 4));
    if (e == cudaSuccess) {
        pitchedDevPtr->ptr = (void *)(uintptr_t)d;
        pitchedDevPtr->pitch = pitch;
        pitchedDevPtr->xsize = extent.width;
        pitchedDevPtr->ysize = extent.height;
    }
    return e;
}

/* Channel description → driver format and channel count; 0 when not representable. */
static int array_format(const struct cudaChannelFormatDesc *d, CUarray_format *fmt, unsigned *channels) {
    int bits = d->x;
    unsigned n = (d->x > 0) + (d->y > 0) + (d->z > 0) + (d->w > 0);
    if ((d->y && d->y != bits) || (d->z && d->z != bits) || (d->w && d->w != bits))
        return 0;
    switch (d->f) {
    case cudaChannelFormatKindSigned:
        *fmt = bits == 8 ? CU_AD_FORMAT_SIGNED_INT8 : bits == 16 ? CU_AD_FORMAT_SIGNED_INT16
               : bits == 32 ? CU_AD_FORMAT_SIGNED_INT32 : 0;
        break;
    case cudaChannelFormatKindUnsigned:
        *fmt = bits == 8 ? CU_AD_FORMAT_UNSIGNED_INT8 : bits == 16 ? CU_AD_FORMAT_UNSIGNED_INT16
               : bits == 32 ? CU_AD_FORMAT_UNSIGNED_INT32 : 0;
        break;
    case cudaChannelFormatKindFloat:
        *fmt = bits == 16 ? CU_AD_FORMAT_HALF : bits == 32 ? CU_AD_FORMAT_FLOAT : 0;
        break;
    default:
        return 0;
    }
    *channels = n;
    return *fmt != 0;
}

static cudaError_t array3d(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t w, size_t h,
                           size_t d, unsigned flags) {
    INIT_OR_RETURN();
    CUDA_ARRAY3D_DESCRIPTOR ad;
    memset(&ad, 0, sizeof ad);
    if (!array || !desc || !array_format(desc, &ad.Format, &ad.NumChannels))
        return set_error(cudaErrorInvalidValue);
    ad.Width = w;
    ad.Height = h;
    ad.Depth = d;
    ad.Flags = flags;
    return DRV(drv.array3DCreate((CUarray *)array, &ad));
}

EXPORT cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc, size_t width,
                                   size_t height, unsigned int flags) {
    return array3d(array, desc, width, height, 0, flags);
}

EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                     cudaExtent extent, unsigned int flags) {
    return array3d(array, desc, extent.width, extent.height, extent.depth, flags);
}

static cudaError_t malloc_async(PFN_cuMemAllocAsync fn, void **devPtr, size_t size, cudaStream_t stream) {
    INIT_OR_RETURN();
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    CUresult r = fn(&d, size, (CUstream)stream);
    if (r == CUDA_ERROR_INVALID_CONTEXT) {
        /* A thread without a context: bind the primary one and try again. */
        CUcontext ctx = NULL;
        if (drv.primaryCtxRetain(&ctx, current_device) == CUDA_SUCCESS &&
            drv.ctxSetCurrent(ctx) == CUDA_SUCCESS)
            r = fn(&d, size, (CUstream)stream);
    }
    cudaError_t e = DRV(r);
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    ensure_init();
    return malloc_async(drv.memAllocAsync, devPtr, size, stream);
}

EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream) {
    ensure_init();
    return malloc_async(drv.memAllocAsync_ptsz, devPtr, size, stream);
}

static cudaError_t malloc_pool(PFN_cuMemAllocFromPoolAsync fn, void **ptr, size_t size, cudaMemPool_t pool,
                               cudaStream_t stream) {
    INIT_OR_RETURN();
    if (!ptr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    cudaError_t e = DRV(fn(&d, size, (CUmemoryPool)pool, (CUstream)stream));
    if (e == cudaSuccess)
        *ptr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
    ensure_init();
    return malloc_pool(drv.memAllocFromPoolAsync, ptr, size, memPool, stream);
}

EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream) {
    ensure_init();
    return malloc_pool(drv.memAllocFromPoolAsync_ptsz, ptr, size, memPool, stream);
}

/* cudaFree(0) is how programs create the context: it reaches the driver as cuMemFree_v2(0). */
EXPORT cudaError_t cudaFree(void *devPtr) {
    INIT_OR_RETURN();
    return DRV(drv.memFree((CUdeviceptr)(uintptr_t)devPtr));
}

EXPORT cudaError_t cudaFreeHost(void *ptr) {
    INIT_OR_RETURN();
    return DRV(drv.memFreeHost(ptr));
}

EXPORT cudaError_t cudaFreeArray(cudaArray_t array) {
    INIT_OR_RETURN();
    if (!array)
        return cudaSuccess;
    return DRV(drv.arrayDestroy((CUarray)array));
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    INIT_OR_RETURN();
    return DRV(drv.memFreeAsync((CUdeviceptr)(uintptr_t)devPtr, (CUstream)stream));
}

EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream) {
    INIT_OR_RETURN();
    return DRV(drv.memFreeAsync_ptsz((CUdeviceptr)(uintptr_t)devPtr, (CUstream)stream));
}

EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device) {
    INIT_OR_RETURN();
    return DRV(drv.deviceGetDefaultMemPool((CUmemoryPool *)memPool, device));
}

/* ---- registered host memory and IPC (issue 12) ---- */

EXPORT cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    INIT_OR_RETURN();
    return DRV(drv.memHostRegister(ptr, size, flags));
}

EXPORT cudaError_t cudaHostUnregister(void *ptr) {
    INIT_OR_RETURN();
    return DRV(drv.memHostUnregister(ptr));
}

EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    INIT_OR_RETURN();
    return DRV(drv.ipcGetMemHandle((CUipcMemHandle *)handle, (CUdeviceptr)(uintptr_t)devPtr));
}

EXPORT cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    INIT_OR_RETURN();
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    CUdeviceptr d = 0;
    cudaError_t e = DRV(drv.ipcOpenMemHandle(&d, h, flags));
    if (e == cudaSuccess)
        *devPtr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    INIT_OR_RETURN();
    return DRV(drv.ipcCloseMemHandle((CUdeviceptr)(uintptr_t)devPtr));
}

EXPORT cudaError_t cudaMemPoolExportPointer(cudaMemPoolPtrExportData *exportData, void *ptr) {
    INIT_OR_RETURN();
    return DRV(drv.memPoolExportPointer((CUmemPoolPtrExportData *)exportData, (CUdeviceptr)(uintptr_t)ptr));
}

EXPORT cudaError_t cudaMemPoolImportPointer(void **ptr, cudaMemPool_t memPool, cudaMemPoolPtrExportData *exportData) {
    INIT_OR_RETURN();
    if (!ptr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    cudaError_t e =
        DRV(drv.memPoolImportPointer(&d, (CUmemoryPool)memPool, (CUmemPoolPtrExportData *)exportData));
    if (e == cudaSuccess)
        *ptr = (void *)(uintptr_t)d;
    return e;
}

EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    INIT_OR_RETURN();
    return DRV(drv.memGetInfo(free_bytes, total_bytes));
}

/* ---- copies: every block is host memory, so the kind does not matter ---- */

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    INIT_OR_RETURN();
    if ((unsigned)kind > cudaMemcpyDefault || (count && (!dst || !src)))
        return set_error(cudaErrorInvalidValue);
    if (count)
        memmove(dst, src, count);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                   cudaStream_t stream) {
    (void)stream;
    return cudaMemcpy(dst, src, count, kind);
}

EXPORT cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind) {
    return cudaMemcpy((char *)symbol + offset, src, count, kind);
}

EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                        enum cudaMemcpyKind kind) {
    return cudaMemcpy(dst, (const char *)symbol + offset, count, kind);
}

EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                size_t height, enum cudaMemcpyKind kind) {
    INIT_OR_RETURN();
    if (width > dpitch || width > spitch)
        return set_error(cudaErrorInvalidValue);
    for (size_t row = 0; row < height; row++) {
        cudaError_t e = cudaMemcpy((char *)dst + row * dpitch, (const char *)src + row * spitch, width, kind);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    INIT_OR_RETURN();
    if (count && !devPtr)
        return set_error(cudaErrorInvalidValue);
    if (count)
        memset(devPtr, value, count);
    return cudaSuccess;
}

EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
    (void)stream;
    return cudaMemset(devPtr, value, count);
}

/* ---- devices, errors, versions ---- */

EXPORT cudaError_t cudaGetDeviceCount(int *count) {
    if (!count)
        return set_error(cudaErrorInvalidValue);
    cudaError_t e = ensure_init();
    *count = e == cudaSuccess ? 1 : 0;
    return set_error(e);
}

EXPORT cudaError_t cudaSetDevice(int device) {
    INIT_OR_RETURN();
    if (device != 0)
        return set_error(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int *device) {
    INIT_OR_RETURN();
    if (!device)
        return set_error(cudaErrorInvalidValue);
    *device = current_device;
    return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void) {
    INIT_OR_RETURN();
    return DRV(drv.ctxSynchronize());
}

/* Unlike the real one, this frees nothing: the null driver has no contexts to destroy. */
EXPORT cudaError_t cudaDeviceReset(void) {
    INIT_OR_RETURN();
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

EXPORT cudaError_t cudaPeekAtLastError(void) { return last_error; }

struct error_text {
    cudaError_t code;
    const char *name;
    const char *text;
};

static const struct error_text errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotFound, "cudaErrorNotFound", "named symbol not found"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const struct error_text *error_of(cudaError_t e) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e)
            return &errors[i];
    return NULL;
}

EXPORT const char *cudaGetErrorString(cudaError_t error) {
    const struct error_text *t = error_of(error);
    return t ? t->text : "unrecognized error code";
}

EXPORT const char *cudaGetErrorName(cudaError_t error) {
    const struct error_text *t = error_of(error);
    return t ? t->name : "cudaErrorUnknown";
}

EXPORT cudaError_t cudaDriverGetVersion(int *version) {
    if (!version)
        return set_error(cudaErrorInvalidValue);
    if (ensure_init() != cudaSuccess) {
        *version = 0;
        return cudaSuccess;
    }
    return DRV(drv.driverGetVersion(version));
}

EXPORT cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version)
        return set_error(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* cudaDeviceProp is ~1 KiB and its tail changes between releases; fill only its stable head
 * (name, uuid, luid, luidDeviceNodeMask, totalGlobalMem, sharedMemPerBlock, regsPerBlock,
 * warpSize, memPitch, maxThreadsPerBlock, maxThreadsDim, maxGridSize). */
static cudaError_t device_properties(void *prop, int device) {
    INIT_OR_RETURN();
    if (!prop)
        return set_error(cudaErrorInvalidValue);
    if (device != 0)
        return set_error(cudaErrorInvalidDevice);
    char *p = prop;
    memset(p, 0, 348);
    strcpy(p, "nullcuda device");
    size_t total = 0, free_bytes = 0;
    drv.memGetInfo(&free_bytes, &total);
    int ints[] = {65536, 32};
    int dims[] = {1024, 1024, 64, 2147483647, 65535, 65535};
    size_t shared = 49152, mem_pitch = 2147483647, threads = 1024;
    memcpy(p + 288, &total, sizeof total);
    memcpy(p + 296, &shared, sizeof shared);
    memcpy(p + 304, ints, sizeof ints);
    memcpy(p + 312, &mem_pitch, sizeof mem_pitch);
    int t = (int)threads;
    memcpy(p + 320, &t, sizeof t);
    memcpy(p + 324, dims, sizeof dims);
    return cudaSuccess;
}

EXPORT cudaError_t cudaGetDeviceProperties(void *prop, int device) { return device_properties(prop, device); }
EXPORT cudaError_t cudaGetDeviceProperties_v2(void *prop, int device) { return device_properties(prop, device); }

/* cudaGetDriverEntryPoint goes through the same cuGetProcAddress pointer as everything else. */
EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                    unsigned long long flags, int *driverStatus) {
    INIT_OR_RETURN();
    if (!symbol || !funcPtr)
        return set_error(cudaErrorInvalidValue);
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cudaError_t e = DRV(drv.getProcAddress(symbol, funcPtr, (int)cudaVersion, flags, &status));
    if (driverStatus)
        *driverStatus = (int)status;
    return e;
}

EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                           int *driverStatus) {
    return cudaGetDriverEntryPointByVersion(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

/* ---- streams and events: handles only, everything is synchronous ---- */

struct CUevent_st {
    struct timespec at;
};

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    INIT_OR_RETURN();
    if (!stream)
        return set_error(cudaErrorInvalidValue);
    *stream = malloc(16);
    return *stream ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    (void)flags;
    return cudaStreamCreate(stream);
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    INIT_OR_RETURN();
    if (!stream)
        return set_error(cudaErrorInvalidResourceHandle);
    free(stream);
    return cudaSuccess;
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    (void)stream;
    INIT_OR_RETURN();
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event) {
    INIT_OR_RETURN();
    if (!event)
        return set_error(cudaErrorInvalidValue);
    *event = calloc(1, sizeof **event);
    return *event ? cudaSuccess : set_error(cudaErrorMemoryAllocation);
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    (void)flags;
    return cudaEventCreate(event);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    (void)stream;
    INIT_OR_RETURN();
    if (!event)
        return set_error(cudaErrorInvalidResourceHandle);
    clock_gettime(CLOCK_MONOTONIC, &event->at);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    INIT_OR_RETURN();
    return event ? cudaSuccess : set_error(cudaErrorInvalidResourceHandle);
}

EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    INIT_OR_RETURN();
    if (!ms || !start || !end)
        return set_error(cudaErrorInvalidValue);
    *ms = (float)((end->at.tv_sec - start->at.tv_sec) * 1e3 + (end->at.tv_nsec - start->at.tv_nsec) / 1e6);
    return cudaSuccess;
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
    INIT_OR_RETURN();
    if (!event)
        return set_error(cudaErrorInvalidResourceHandle);
    free(event);
    return cudaSuccess;
}

/* ---- what nvcc-generated host code imports; kernels are no-ops ---- */

EXPORT void **__cudaRegisterFatBinary(void *fatCubin) {
    void **handle = malloc(sizeof *handle);
    if (handle)
        *handle = fatCubin;
    return handle;
}

EXPORT void __cudaRegisterFatBinaryEnd(void **fatCubinHandle) { (void)fatCubinHandle; }

EXPORT void __cudaUnregisterFatBinary(void **fatCubinHandle) { free(fatCubinHandle); }

EXPORT char __cudaInitModule(void **fatCubinHandle) {
    (void)fatCubinHandle;
    return 1;
}

EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, void *tid, void *bid, dim3 *bDim,
                                   dim3 *gDim, int *wSize) {
    (void)fatCubinHandle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
    (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

/* The host shadow variable is the device variable: memory is all host memory. */
EXPORT void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
                              int ext, size_t size, int constant, int global) {
    (void)fatCubinHandle, (void)hostVar, (void)deviceAddress, (void)deviceName;
    (void)ext, (void)size, (void)constant, (void)global;
}

EXPORT void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant, int global) {
    (void)fatCubinHandle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName;
    (void)ext, (void)size, (void)constant, (void)global;
}

static __thread struct {
    dim3 grid, block;
    size_t shared;
    void *stream;
} call_config;

EXPORT unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream) {
    call_config.grid = gridDim;
    call_config.block = blockDim;
    call_config.shared = sharedMem;
    call_config.stream = stream;
    return 0;
}

EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream) {
    if (gridDim)
        *gridDim = call_config.grid;
    if (blockDim)
        *blockDim = call_config.block;
    if (sharedMem)
        *sharedMem = call_config.shared;
    if (stream)
        *(void **)stream = call_config.stream;
    return cudaSuccess;
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun) {
    if (!kernel)
        return set_error(cudaErrorInvalidValue);
    *kernel = (cudaKernel_t)hostFun;
    return cudaSuccess;
}

static cudaError_t launch(const void *func, dim3 grid, dim3 block) {
    INIT_OR_RETURN();
    if (!func || grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
        return set_error(cudaErrorInvalidValue);
    return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                      size_t sharedMem, cudaStream_t stream) {
    (void)args, (void)sharedMem, (void)stream;
    return launch(kernel, gridDim, blockDim);
}

EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                           size_t sharedMem, cudaStream_t stream) {
    (void)args, (void)sharedMem, (void)stream;
    return launch(kernel, gridDim, blockDim);
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                    cudaStream_t stream) {
    (void)args, (void)sharedMem, (void)stream;
    return launch(func, gridDim, blockDim);
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream) {
    (void)args, (void)sharedMem, (void)stream;
    return launch(func, gridDim, blockDim);
}

/* Per-thread-default-stream spellings (nvcc --default-stream per-thread) of the plain calls. */
EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    return cudaMemcpy(dst, src, count, kind);
}
EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream) {
    return cudaMemcpyAsync(dst, src, count, kind, stream);
}
EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count) { return cudaMemset(devPtr, value, count); }
EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream) {
    return cudaMemsetAsync(devPtr, value, count, stream);
}
EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) { return cudaStreamSynchronize(stream); }
EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
    return cudaEventRecord(event, stream);
}
EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind) {
    return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}
EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                             enum cudaMemcpyKind kind) {
    return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}
EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                     size_t height, enum cudaMemcpyKind kind) {
    return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
