/* attach_loop: a program `cudaleak attach` is pointed at while it runs. Before its loop it
 * allocates `early` (64 B, through the shared runtime), prints "ready" and flushes. Each of argv[1]
 * steps (default 300), argv[2] ms apart (default 20), keeps three blocks, each reached its own
 * way: 4 KiB through the shared runtime (`cudaMalloc`, whose table of driver entry points lives in
 * libcudart), 8 KiB through the driver's export (`cuMemAlloc_v2`, an import slot of this program)
 * and 16 KiB through this program's own table of driver entry points (filled through
 * cuGetProcAddress_v2, as nvcc's static runtime does), and allocates and frees 1 KiB of scratch.
 * Half way it frees `early`. Then it prints one line and exits with argv[3] (default 0); an exit
 * handler it registered before its loop frees the last 4 KiB block kept (as a C++ static
 * destructor would), after any handler registered later.
 * With argv[4] `traced` it first asks to be traced by its parent (PTRACE_TRACEME), so no other
 * tracer may attach.
 * build: -lcudart -lcuda -ldl */
#include "nullcuda.h"
#include "nullcudart.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/ptrace.h>
#include <time.h>

#define MAX_STEPS 2000

static struct {
    PFN_cuMemAlloc mem_alloc;
} table;

static void *early;
static void *last_kept;

static void free_last_kept(void) {
    if (last_kept)
        cudaFree(last_kept);
}
static void *runtime_kept[MAX_STEPS];
static CUdeviceptr driver_kept[MAX_STEPS], table_kept[MAX_STEPS];

SITE void via_runtime(int i) {
    CHECK(cudaMalloc(&runtime_kept[i], 4096)); // @attach_runtime
    last_kept = runtime_kept[i];
    KEEP(runtime_kept);
}

SITE void via_driver(int i) {
    CHECK(cuMemAlloc_v2(&driver_kept[i], 8192)); // @attach_driver
    KEEP(driver_kept);
}

SITE void via_table(int i) {
    CHECK(table.mem_alloc(&table_kept[i], 16384)); // @attach_table
    KEEP(table_kept);
}

SITE void scratch(void) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, 1024));
    CHECK(cudaFree(p));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 300;
    int sleep_ms = argc > 2 ? atoi(argv[2]) : 20;
    int code = argc > 3 ? atoi(argv[3]) : 0;
    if (steps < 1 || steps > MAX_STEPS)
        steps = 300;
    if (argc > 4 && strcmp(argv[4], "traced") == 0 && ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
        return 95;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v2 gpa = h ? (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa)
        return 96;
    CUdriverProcAddressQueryResult st;
    CHECK(gpa("cuMemAlloc", (void **)&table.mem_alloc, 13000, 0, &st));
    CHECK(cudaMalloc(&early, 64));
    atexit(free_last_kept);
    printf("ready\n");
    fflush(stdout);
    struct timespec pause = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
    for (int i = 0; i < steps; i++) {
        via_runtime(i);
        via_driver(i);
        via_table(i);
        scratch();
        if (i == steps / 2)
            CHECK(cudaFree(early));
        nanosleep(&pause, NULL);
    }
    printf("attach_loop: %d steps\n", steps);
    return code;
}
