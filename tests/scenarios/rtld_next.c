/* rtld_next: leaves one 1000-byte block live and prints whether getppid() (wrapped by the
 * next_probe interposer the test preloads) still answers what the kernel says.
 * build: -lcuda */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr kept;

SITE void alloc_kept(void) {
    CHECK(cuMemAlloc_v2(&kept, 1000)); // @kept
    KEEP(kept);
}

int main(void) {
    CHECK(cuInit(0));
    alloc_kept();
    printf("getppid %s\n", getppid() == (pid_t)syscall(SYS_getppid) ? "ok" : "wrong");
    return 0;
}
