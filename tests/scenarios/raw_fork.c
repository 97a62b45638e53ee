/* raw_fork: fork_child with a child made without fork(), so no atfork handler runs: by `_Fork()`
 * (argv[1] = "_Fork") or by `syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)` ("clone"). The parent
 * allocates one block (1111 B) and makes the child; the child frees the inherited block (one
 * its own table never saw), allocates one of its own (2222 B) and exits. With "quiet" as the
 * second argument the child makes no CUDA call at all. The parent waits, then prints.
 * build: -lcuda */
#define _GNU_SOURCE
#include "nullcuda.h"
#include "scenario.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static CUdeviceptr parent_block, child_block;

SITE void parent_alloc(void) {
    CHECK(cuMemAlloc_v2(&parent_block, 1111)); // @parent_alloc
    KEEP(parent_block);
}
SITE void child_alloc(void) {
    CHECK(cuMemAlloc_v2(&child_block, 2222)); // @child_alloc
    KEEP(child_block);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 98;
    int quiet = argc > 2 && strcmp(argv[2], "quiet") == 0;
    CHECK(cuInit(0));
    parent_alloc();
    fflush(stdout);
    pid_t pid;
    if (strcmp(argv[1], "_Fork") == 0)
        pid = _Fork();
    else if (strcmp(argv[1], "clone") == 0)
        pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    else
        return 98;
    if (pid < 0)
        return 97;
    if (pid == 0) {
        if (!quiet) {
            CHECK(cuMemFree_v2(parent_block));
            child_alloc();
        }
        printf("child done\n");
        exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 96;
    printf("parent done\n");
    return 0;
}
