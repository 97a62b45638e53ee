/* fork_child: the parent allocates one block and forks; the child frees the inherited block
 * (a block its own table never saw), allocates one of its own and exits; the parent waits.
 * Two dumps: the parent's with its block, the child's with its block and one untracked free.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

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

int main(void) {
    CHECK(cuInit(0));
    parent_alloc();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 97;
    if (pid == 0) {
        CHECK(cuMemFree_v2(parent_block));
        child_alloc();
        printf("child done\n");
        exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 96;
    printf("parent done\n");
    return 0;
}
