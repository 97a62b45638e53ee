/* leak_exit: three live blocks (4096 + 8192 + 63590 = 75878 bytes, "74.1 KiB") at exit, a line
 * on stdout and one on stderr, and the exit status given as argv[1] (exit() from a nested
 * function) or 0 (return from main).
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

static void *blocks[3];

SITE void leak_three(void) {
    CHECK(cudaMalloc(&blocks[0], 4096)); // @leak_a
    CHECK(cudaMalloc(&blocks[1], 8192)); // @leak_b
    CHECK(cudaMalloc(&blocks[2], 63590)); // @leak_c
    KEEP(blocks);
}

SITE void finish(int status) {
    fflush(stdout);
    exit(status);
}

int main(int argc, char **argv) {
    leak_three();
    printf("hello from leak_exit\n");
    fprintf(stderr, "leak_exit says this on stderr\n");
    if (argc > 1)
        finish(atoi(argv[1]));
    return 0;
}
