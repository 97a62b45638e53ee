// ipc: CUDA IPC between two processes. argv[1] = leak | clean. The parent forks before touching
// CUDA; the parent allocates 4 MiB and sends its IPC handle through a pipe; the child opens it
// with cudaIpcOpenMemHandle, reads it, and — in `clean` mode — closes it. The parent frees its
// allocation after the child is done. `leak`: the child's dump has 1 live block of kind ipc.
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int child(int rd, int done, bool leak) {
    cudaIpcMemHandle_t h;
    if (read(rd, &h, sizeof h) != (ssize_t)sizeof h)
        return 2;
    void *p = nullptr;
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess)); // LEAK-HERE
    int v = 0;
    CHECK(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost));
    if (!leak)
        CHECK(cudaIpcCloseMemHandle(p));
    char c = 'd';
    if (write(done, &c, 1) != 1)
        return 3;
    printf("ipc child: read %d, %s\n", v, leak ? "left open" : "closed");
    return 0;
}

int main(int argc, char **argv) {
    bool leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return 2;
    pid_t pid = fork();
    if (pid == 0)
        return child(to_child[0], to_parent[1], leak);
    void *p;
    CHECK(cudaMalloc(&p, 4 << 20));
    CHECK(cudaMemset(p, 0, 4 << 20));
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, p));
    if (write(to_child[1], &h, sizeof h) != (ssize_t)sizeof h)
        return 2;
    char c;
    if (read(to_parent[0], &c, 1) != 1)
        return 3;
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(cudaFree(p));
    printf("ipc parent: child exited %d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}
