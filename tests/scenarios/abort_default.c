/* abort_default: leaves one 6000-byte block, prints "aborting" and calls abort() with SIGABRT at
 * its default action (RLIMIT_CORE 0, so no core file). Under the shim: a dump with end=signal,
 * SIGABRT, and the process still dies of SIGABRT.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <sys/resource.h>

static CUdeviceptr block;

SITE void alloc_block(void) {
    CHECK(cuMemAlloc_v2(&block, 6000)); // @abort_alloc
    KEEP(block);
}

int main(void) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    CHECK(cuInit(0));
    alloc_block();
    printf("aborting\n");
    fflush(stdout);
    abort();
}
