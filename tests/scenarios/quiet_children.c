/* quiet_children: the parent allocates and frees one block, then runs three children (this same
 * program, exec'd with the argument `helper`, like ptxas under JAX) that make no CUDA call at
 * all, and waits for them. Every process writes a dump; only the parent made an allocation.
 * Prints "done" and exits 0.
 * build: -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "helper") == 0)
        return 0;
    CHECK(cuInit(0));
    CUdeviceptr block = 0;
    CHECK(cuMemAlloc_v2(&block, 2048));
    CHECK(cuMemFree_v2(block));
    fflush(stdout);
    for (int i = 0; i < 3; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 97;
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], "helper", (char *)NULL);
            _exit(95);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 96;
    }
    printf("done\n");
    return 0;
}
