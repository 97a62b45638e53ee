/* teardown_fail: one allocation over the null driver's limit (the test sets NULLCUDA_MEM_LIMIT
 * to 1 MiB) fails while the program runs, and another from an exit handler the program
 * registered before its first CUDA call — it runs after the shim's own late exit handler, the
 * way the CUDA runtime's and the frameworks' teardown does. Only the second is made during exit.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

static void *block;

SITE void fail_now(void) {
    void *p = NULL;
    printf("running rc=%d\n", cudaMalloc(&p, 2097152)); // @fail_running
}

static void at_teardown(void) {
    void *p = NULL;
    printf("teardown rc=%d\n", cudaMalloc(&p, 3145728)); // @fail_teardown
}

int main(void) {
    atexit(at_teardown);
    CHECK(cudaMalloc(&block, 4096));
    KEEP(block);
    fail_now();
    return 0;
}
