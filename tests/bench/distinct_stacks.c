/* distinct_stacks N: N live blocks of 256 bytes, each from its own call stack (a walk of nine
 * levels through four functions: 4^9 = 262 144 paths), as a dump of a large program with many
 * callsites looks to the CLI. scripts/bench-report.py --shim runs it under the shim on the
 * null-device runtime and measures `cudaleak report` on its dump. */
#include <stdio.h>
#include <stdlib.h>

#include "nullcudart.h"

__attribute__((noinline)) static void leaf(void) {
    void *p;
    if (cudaMalloc(&p, 256) != cudaSuccess)
        abort();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void walk(int depth, unsigned bits);

#define STEP(name)                                                                                 \
    __attribute__((noinline)) static void name(int depth, unsigned bits) {                         \
        walk(depth - 1, bits >> 2);                                                                \
        __asm__ volatile("");                                                                      \
    }
STEP(step_a)
STEP(step_b)
STEP(step_c)
STEP(step_d)

__attribute__((noinline)) static void walk(int depth, unsigned bits) {
    if (depth == 0) {
        leaf();
        return;
    }
    switch (bits & 3) {
    case 0: step_a(depth, bits); break;
    case 1: step_b(depth, bits); break;
    case 2: step_c(depth, bits); break;
    default: step_d(depth, bits); break;
    }
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100000;
    for (unsigned i = 0; i < n; i++)
        walk(9, i);
    return 0;
}
