/* kinds_pointers: every driver function of registered host memory, IPC and virtual memory,
 * once each, through one route the shim wraps (argv[1]):
 *   direct    the exported symbols of a program linked with -lcuda
 *   getproc   dlopen + dlsym("cuGetProcAddress_v2") + base-name lookups (CUDA 12/13 cudart)
 *   getproc1  the same through the v1 cuGetProcAddress from ("cuGetProcAddress", 11030)
 *   dlsym     one dlsym per versioned ELF name (old runtimes)
 * Base-name lookups ask for the first version of cuMemHostRegister (4000) and
 * cuIpcOpenMemHandle (4010) for one call and the second (6050, 11000) for the other, so every
 * route reaches both exported functions of each.
 * argv[2] is `leak` (the 8 records below stay live), `free` (each freed with its own function),
 * `mismatch` (frees that name the wrong kind fail and free nothing) or `fail` (a second
 * registration, a mapping of no allocation and an IPC open of a bad handle fail).
 * The exporters' blocks (8100, 8200, 8300 bytes) are freed in every mode.
 * build: -lcuda -ldl */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

static struct {
    PFN_cuMemAlloc memAlloc;
    PFN_cuMemFree memFree;
    PFN_cuMemCreate memCreate;
    PFN_cuMemRelease memRelease;
    PFN_cuMemFreeHost memFreeHost;
    PFN_cuMemHostRegister memHostRegister, memHostRegister_v2;
    PFN_cuMemHostUnregister memHostUnregister;
    PFN_cuIpcGetMemHandle ipcGetMemHandle;
    PFN_cuIpcOpenMemHandle ipcOpenMemHandle, ipcOpenMemHandle_v2;
    PFN_cuIpcCloseMemHandle ipcCloseMemHandle;
    PFN_cuMemPoolExportPointer memPoolExportPointer;
    PFN_cuMemPoolImportPointer memPoolImportPointer;
    PFN_cuMemAddressReserve memAddressReserve;
    PFN_cuMemAddressFree memAddressFree;
    PFN_cuMemMap memMap;
    PFN_cuMemUnmap memUnmap;
} cu;

static void *handle;
static PFN_cuGetProcAddress_v2 gpa2;
static PFN_cuGetProcAddress_v1 gpa1;
static const char *route;

static void *get(const char *base, const char *elf, int version) {
    void *fn = NULL;
    if (strcmp(route, "dlsym") == 0) {
        fn = dlsym(handle, elf);
    } else if (strcmp(route, "getproc1") == 0) {
        CHECK(gpa1(base, &fn, version, 0));
    } else {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CHECK(gpa2(base, &fn, version, 0, &status));
        CHECK(status);
    }
    if (!fn) {
        fprintf(stderr, "no %s\n", elf);
        exit(98);
    }
    return fn;
}

#define DIRECT(field, fn) cu.field = fn
#define LOOKUP(field, type, base, elf, version) cu.field = (type)get(base, elf, version)

static void bind(void) {
    if (strcmp(route, "direct") == 0) {
        DIRECT(memAlloc, cuMemAlloc_v2);
        DIRECT(memFree, cuMemFree_v2);
        DIRECT(memCreate, cuMemCreate);
        DIRECT(memRelease, cuMemRelease);
        DIRECT(memFreeHost, cuMemFreeHost);
        DIRECT(memHostRegister, cuMemHostRegister);
        DIRECT(memHostRegister_v2, cuMemHostRegister_v2);
        DIRECT(memHostUnregister, cuMemHostUnregister);
        DIRECT(ipcGetMemHandle, cuIpcGetMemHandle);
        DIRECT(ipcOpenMemHandle, cuIpcOpenMemHandle);
        DIRECT(ipcOpenMemHandle_v2, cuIpcOpenMemHandle_v2);
        DIRECT(ipcCloseMemHandle, cuIpcCloseMemHandle);
        DIRECT(memPoolExportPointer, cuMemPoolExportPointer);
        DIRECT(memPoolImportPointer, cuMemPoolImportPointer);
        DIRECT(memAddressReserve, cuMemAddressReserve);
        DIRECT(memAddressFree, cuMemAddressFree);
        DIRECT(memMap, cuMemMap);
        DIRECT(memUnmap, cuMemUnmap);
        return;
    }
    handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (!handle) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(97);
    }
    if (strcmp(route, "dlsym") != 0) {
        CUdriverProcAddressQueryResult status;
        void *fn = NULL;
        gpa2 = (PFN_cuGetProcAddress_v2)dlsym(handle, "cuGetProcAddress_v2");
        if (!gpa2)
            exit(96);
        CHECK(gpa2("cuGetProcAddress", &fn, 12000, 0, &status));
        gpa2 = (PFN_cuGetProcAddress_v2)fn;
        CHECK(gpa2("cuGetProcAddress", &fn, 11030, 0, &status));
        gpa1 = (PFN_cuGetProcAddress_v1)fn;
    }
    LOOKUP(memAlloc, PFN_cuMemAlloc, "cuMemAlloc", "cuMemAlloc_v2", 3020);
    LOOKUP(memFree, PFN_cuMemFree, "cuMemFree", "cuMemFree_v2", 3020);
    LOOKUP(memCreate, PFN_cuMemCreate, "cuMemCreate", "cuMemCreate", 10020);
    LOOKUP(memRelease, PFN_cuMemRelease, "cuMemRelease", "cuMemRelease", 10020);
    LOOKUP(memFreeHost, PFN_cuMemFreeHost, "cuMemFreeHost", "cuMemFreeHost", 2000);
    LOOKUP(memHostRegister, PFN_cuMemHostRegister, "cuMemHostRegister", "cuMemHostRegister", 4000);
    LOOKUP(memHostRegister_v2, PFN_cuMemHostRegister, "cuMemHostRegister", "cuMemHostRegister_v2", 6050);
    LOOKUP(memHostUnregister, PFN_cuMemHostUnregister, "cuMemHostUnregister", "cuMemHostUnregister", 4000);
    LOOKUP(ipcGetMemHandle, PFN_cuIpcGetMemHandle, "cuIpcGetMemHandle", "cuIpcGetMemHandle", 4010);
    LOOKUP(ipcOpenMemHandle, PFN_cuIpcOpenMemHandle, "cuIpcOpenMemHandle", "cuIpcOpenMemHandle", 4010);
    LOOKUP(ipcOpenMemHandle_v2, PFN_cuIpcOpenMemHandle, "cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 11000);
    LOOKUP(ipcCloseMemHandle, PFN_cuIpcCloseMemHandle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle", 4010);
    LOOKUP(memPoolExportPointer, PFN_cuMemPoolExportPointer, "cuMemPoolExportPointer", "cuMemPoolExportPointer",
           11020);
    LOOKUP(memPoolImportPointer, PFN_cuMemPoolImportPointer, "cuMemPoolImportPointer", "cuMemPoolImportPointer",
           11020);
    LOOKUP(memAddressReserve, PFN_cuMemAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve", 10020);
    LOOKUP(memAddressFree, PFN_cuMemAddressFree, "cuMemAddressFree", "cuMemAddressFree", 10020);
    LOOKUP(memMap, PFN_cuMemMap, "cuMemMap", "cuMemMap", 10020);
    LOOKUP(memUnmap, PFN_cuMemUnmap, "cuMemUnmap", "cuMemUnmap", 10020);
}

static char reg1[7100], reg2[7200];
static CUdeviceptr src1, src2, src3, ipc1, ipc2, imported, base;
static CUmemGenericAllocationHandle phys;
static CUmemoryPool pool;

SITE void register_v1(void) {
    CHECK(cu.memHostRegister(reg1, sizeof reg1, CU_MEMHOSTREGISTER_PORTABLE)); // @cuMemHostRegister
    KEEP(reg1);
}
SITE void register_v2(void) {
    CHECK(cu.memHostRegister_v2(reg2, sizeof reg2, 0)); // @cuMemHostRegister_v2
    KEEP(reg2);
}
SITE void open_v1(CUipcMemHandle h) {
    CHECK(cu.ipcOpenMemHandle(&ipc1, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)); // @cuIpcOpenMemHandle
    KEEP(ipc1);
}
SITE void open_v2(CUipcMemHandle h) {
    CHECK(cu.ipcOpenMemHandle_v2(&ipc2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)); // @cuIpcOpenMemHandle_v2
    KEEP(ipc2);
}
SITE void import_pointer(CUmemPoolPtrExportData *data) {
    CHECK(cu.memPoolImportPointer(&imported, pool, data)); // @cuMemPoolImportPointer
    KEEP(imported);
}
SITE void reserve(void) {
    CHECK(cu.memAddressReserve(&base, 16 * MIB, 0, 0, 0)); // @cuMemAddressReserve
    KEEP(base);
}
SITE void create(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    CHECK(cu.memCreate(&phys, 4 * MIB, &prop, 0)); // @cuMemCreate
    KEEP(phys);
}
SITE void map(void) {
    CHECK(cu.memMap(base, 2 * MIB, 2 * MIB, phys, 0)); // @cuMemMap
    KEEP(base);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: kinds_pointers direct|getproc|getproc1|dlsym leak|free|mismatch|fail\n");
        return 2;
    }
    route = argv[1];
    const char *mode = argv[2];
    bind();
    CHECK(cuInit(0));
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));

    if (strcmp(mode, "mismatch") == 0) {
        /* A registered pointer is not pinned memory of cuMemAllocHost; an IPC close of a
         * cuMemAlloc block closes nothing: both fail, and both blocks stay as they were. */
        CHECK(cu.memAlloc(&src1, 8100));
        register_v1();
        int freed_host = cu.memFreeHost(reg1);       // @mismatch_free_host
        int closed_device = cu.ipcCloseMemHandle(src1); // @mismatch_close
        printf("cuMemFreeHost(registered)=%d cuIpcCloseMemHandle(device)=%d\n", freed_host, closed_device);
        CHECK(cu.memHostUnregister(reg1));
        CHECK(cu.memFree(src1));
        printf("route=%s mismatch\n", route);
        return 0;
    }

    if (strcmp(mode, "fail") == 0) {
        CUipcMemHandle bad;
        CUdeviceptr nowhere = 0;
        memset(&bad, 0, sizeof bad);
        register_v1();
        int again = cu.memHostRegister_v2(reg1, sizeof reg1, 0);      // @fail_register
        reserve();
        int unmapped = cu.memMap(base, 2 * MIB, 0, 0x1234, 0);        // @fail_map
        int opened = cu.ipcOpenMemHandle_v2(&nowhere, bad, 0);         // @fail_open
        printf("register again=%d map of no allocation=%d open of a bad handle=%d\n", again, unmapped,
               opened);
        CHECK(cu.memHostUnregister(reg1));
        CHECK(cu.memAddressFree(base, 16 * MIB));
        printf("route=%s fail\n", route);
        return 0;
    }

    CUipcMemHandle h1, h2;
    CUmemPoolPtrExportData data;
    CHECK(cu.memAlloc(&src1, 8100));
    CHECK(cu.memAlloc(&src2, 8200));
    CHECK(cu.memAlloc(&src3, 8300));
    CHECK(cu.ipcGetMemHandle(&h1, src1));
    CHECK(cu.ipcGetMemHandle(&h2, src2));
    CHECK(cu.memPoolExportPointer(&data, src3));

    register_v1();
    register_v2();
    open_v1(h1);
    open_v2(h2);
    import_pointer(&data);
    reserve();
    create();
    map();
    CHECK(cuMemsetD8_v2(base, 5, 2 * MIB)); /* the mapping is usable */
    CHECK(cuMemsetD8_v2(ipc2, 6, 8200));

    CHECK(cu.memFree(src1));
    CHECK(cu.memFree(src2));
    CHECK(cu.memFree(src3));
    if (strcmp(mode, "free") == 0) {
        CHECK(cu.memHostUnregister(reg1));
        CHECK(cu.memHostUnregister(reg2));
        CHECK(cu.ipcCloseMemHandle(ipc1));
        CHECK(cu.ipcCloseMemHandle(ipc2));
        CHECK(cu.memFree(imported));
        CHECK(cu.memUnmap(base, 2 * MIB));
        CHECK(cu.memRelease(phys));
        CHECK(cu.memAddressFree(base, 16 * MIB));
        printf("route=%s freed 8\n", route);
    } else {
        printf("route=%s leaked 8\n", route);
    }
    return 0;
}
