/* fork_exec: the parent leaves one 3333-byte block and forks; the child execs this same program
 * (/proc/self/exe, argv[0] kept) with the argument `leaf`, which leaves one 4444-byte block,
 * prints "leaf done" and exits 0; the parent waits for it, prints "parent done" and exits 0.
 * Two dumps: the parent's (its block) and the exec'd child's (its block, a fresh image).
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static CUdeviceptr parent_block, leaf_block;

SITE void parent_alloc(void) {
    CHECK(cuMemAlloc_v2(&parent_block, 3333)); // @parent_alloc
    KEEP(parent_block);
}
SITE void leaf_alloc(void) {
    CHECK(cuMemAlloc_v2(&leaf_block, 4444)); // @leaf_alloc
    KEEP(leaf_block);
}

int main(int argc, char **argv) {
    CHECK(cuInit(0));
    if (argc > 1 && strcmp(argv[1], "leaf") == 0) {
        leaf_alloc();
        printf("leaf done\n");
        return 0;
    }
    parent_alloc();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 97;
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "leaf", (char *)NULL);
        _exit(95);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 96;
    printf("parent done\n");
    return 0;
}
