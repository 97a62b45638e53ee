/* fork_loader: a fork while the shim's lookup of a hooked function's real one is inside the
 * loader. Thread C dlopens libslowinit.so (argv[1]), whose constructor holds the loader's lock
 * (dl_load_lock) for 60 ms; meanwhile thread B makes the process's first call of
 * cuMemAllocManaged, whose real function the shim then looks up with dlsym, which waits for that
 * lock; meanwhile the main thread forks. glibc's fork() re-initialises the loader's lock in the
 * child, so the child must run as any other: it looks a symbol up (which takes that lock) under a
 * 2 s alarm and leaves with _exit: "child ok", or "child hung" where the lock was copied held (its
 * exit() would wait forever too). The shim must not add a lock of its own to that moment either.
 * build: -lcuda -lpthread -ldl */
#define _GNU_SOURCE
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *slow_library;
static int c_started, b_started;

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void *load_slowly(void *arg) {
    (void)arg;
    __atomic_store_n(&c_started, 1, __ATOMIC_RELEASE);
    if (!dlopen(slow_library, RTLD_NOW))
        exit(98);
    return NULL;
}

SITE void *first_managed(void *arg) {
    (void)arg;
    CUdeviceptr p;
    __atomic_store_n(&b_started, 1, __ATOMIC_RELEASE);
    CHECK(cuMemAllocManaged(&p, 4096, 1)); // @fork_loader_first
    CHECK(cuMemFree_v2(p));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    slow_library = argv[1];
    CHECK(cuInit(0));
    pthread_t c, b;
    if (pthread_create(&c, NULL, load_slowly, NULL) != 0)
        return 97;
    while (!__atomic_load_n(&c_started, __ATOMIC_ACQUIRE))
        sched_yield();
    sleep_ms(10); /* C is inside the constructor, holding the loader's lock */
    if (pthread_create(&b, NULL, first_managed, NULL) != 0)
        return 97;
    while (!__atomic_load_n(&b_started, __ATOMIC_ACQUIRE))
        sched_yield();
    sleep_ms(10); /* B is inside the shim's dlsym, waiting for the loader's lock */
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 96;
    if (pid == 0) {
        alarm(2);
        dlsym(RTLD_DEFAULT, "cuInit");
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return 95;
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        printf("child ok\n");
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        printf("child hung\n");
    else
        return 94;
    return 0;
}
