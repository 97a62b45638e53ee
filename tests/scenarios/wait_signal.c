/* wait_signal: leaves one 3000-byte block live, prints "ready", then waits for a line on stdin;
 * after it, leaves a second 5000-byte block and exits 0. Tests send it signals while it waits:
 * SIGTERM ends it (a dump with end=signal), SIGUSR1 asks for a snapshot.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr first, second;

SITE void alloc_first(void) {
    CHECK(cuMemAlloc_v2(&first, 3000)); // @first
    KEEP(first);
}
SITE void alloc_second(void) {
    CHECK(cuMemAlloc_v2(&second, 5000)); // @second
    KEEP(second);
}

int main(void) {
    CHECK(cuInit(0));
    alloc_first();
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 3;
    alloc_second();
    printf("done\n");
    return 0;
}
