/* scenario.h: the little every scenario program shares.
 *
 * A scenario is one-purpose: it makes CUDA calls whose effect the test knows exactly, prints
 * what it observed (return codes, errno, out-params) so the test can check it passes through
 * an interposer unchanged, and marks each interesting call with a `// @name` comment that the
 * test looks up to find the line number. */
#ifndef SCENARIO_H
#define SCENARIO_H

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

/* Allocation sites are their own functions so each one has a stable name in the stack. */
#define SITE __attribute__((noinline)) static

/* Any unexpected CUDA failure ends the program with status 99. */
#define CHECK(call)                                                                             \
    do {                                                                                         \
        int rc_ = (int)(call);                                                                   \
        if (rc_ != 0) {                                                                          \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_);          \
            exit(99);                                                                            \
        }                                                                                        \
    } while (0)

/* Keeps a call from being the function's last act, so it is never turned into a tail call. */
#define KEEP(p) __asm__ volatile("" ::"g"(p) : "memory")

#endif
