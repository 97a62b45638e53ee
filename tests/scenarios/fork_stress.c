/* fork_stress FORKS [raw]: 8 threads allocate and free through the driver without pause while
 * the main thread forks FORKS times, so forks land while other threads are inside the shim,
 * holding or waiting for its locks. Each child allocates two blocks, frees one and exits (its
 * exit dump must hold the other). With `raw`, the children are made by _Fork(), which runs no
 * atfork handler, and exit without a CUDA call (the null driver's own lock may be held for good
 * in them): their exit dumps must hold nothing of their parent's. The parent waits at most 20 s for each child: one that has not ended by
 * then is killed and the program exits with 95 (a deadlock in the child). At the end the threads
 * stop, one block stays live in the parent, and it prints "forks N children_ok N".
 * build: -lcuda -lpthread */
#define _GNU_SOURCE
#include "nullcuda.h"
#include "scenario.h"

#include <string.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define BATCH 4

static volatile int stop;
/* Threads that made their first pair. A thread's first call of a hooked function has the shim
 * look the real one up with dlsym, which holds the loader's lock. glibc's fork() re-initialises
 * that lock in its child, so regular forks start at once and can land in those first calls too
 * (fork_loader.c forks inside one on purpose); a child made by _Fork() keeps the lock as it was
 * and would hang in exit(), as after any thread's dlsym or dlopen (README.md, the `fork()` row),
 * so raw forks start once every thread made its first pair: they are to land inside the shim's
 * own locks. */
static int started;

SITE void child_work(void) {
    CUdeviceptr keep, temp;
    CHECK(cuMemAlloc_v2(&temp, 3333));
    CHECK(cuMemAlloc_v2(&keep, 4444)); // @fork_child_keep
    CHECK(cuMemFree_v2(temp));
    KEEP(keep);
}

SITE void parent_keep(void) {
    CUdeviceptr keep;
    CHECK(cuMemAlloc_v2(&keep, 1111)); // @fork_parent_keep
    KEEP(keep);
}

static void *churn(void *arg) {
    size_t id = (size_t)arg;
    CUdeviceptr batch[BATCH];
    for (int round = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); round++) {
        for (int j = 0; j < BATCH; j++)
            CHECK(cuMemAlloc_v2(&batch[j], 256 + 16 * id + (size_t)j));
        for (int j = 0; j < BATCH; j++)
            CHECK(cuMemFree_v2(batch[j]));
        if (round == 0)
            __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* waitpid with a deadline: 0 when the child exited with status 0. */
static int wait_child(pid_t pid) {
    for (int waited_ms = 0; waited_ms < 20000; waited_ms++) {
        int status = 0;
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        if (got < 0)
            return 1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "fork_stress: child %d did not end within 20 s (deadlock)\n", (int)pid);
    return -1;
}

int main(int argc, char **argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 50;
    int raw = argc > 2 && strcmp(argv[2], "raw") == 0;
    pthread_t threads[THREADS];
    CHECK(cuInit(0));
    for (size_t i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, churn, (void *)i) != 0)
            return 97;
    while (raw && __atomic_load_n(&started, __ATOMIC_ACQUIRE) < THREADS)
        sched_yield();
    int ok = 0;
    for (int i = 0; i < forks; i++) {
        fflush(stdout);
        pid_t pid = raw ? _Fork() : fork();
        if (pid < 0)
            return 96;
        if (pid == 0) {
            if (!raw)
                child_work();
            exit(0);
        }
        int rc = wait_child(pid);
        if (rc < 0) {
            __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
            for (int t = 0; t < THREADS; t++)
                pthread_join(threads[t], NULL);
            return 95;
        }
        ok += rc == 0;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    parent_keep();
    printf("forks %d children_ok %d\n", forks, ok);
    return 0;
}
