/* attach_harm: the programs `cudaleak attach` must never harm, each a way a busy process meets
 * an injected call. argv[1] names the mode:
 *   malloc    the main thread loops aligned_alloc and free with no system call (a C++ service's
 *             hot loop), and keeps and frees a 4 KiB block through cuMemAlloc_v2 every 4096
 *             rounds; a thread stopped there is inside malloc, holding its arena;
 *   malloc2   the same, with a second thread in the same loop (one holds the arena's lock while
 *             the other is stopped);
 *   dlopen    the malloc loop, and a second thread that loops dlopen and dlclose of argv[2]
 *             (tests/nullcuda/churn_lib.c: imports the driver, 32 MiB of data to scan), so
 *             modules come and go while attach patches;
 *   read      the main thread sets errno to 0 and waits in read(0) for one byte, then prints
 *             "errno after successful read: N" (a thread borrowed there and given back must find
 *             its errno as it left it);
 *   stdio     the main thread waits in getchar() for one byte: in read(), but called from inside
 *             the C library's stdio, which holds the stream's lock (never a point where a thread
 *             may be borrowed), then prints "got C".
 * It prints "ready" once looping. The loops run until SIGUSR2 (a handler sets a flag), then the
 * program prints "done", whether its own import of cuMemAlloc_v2 still points at the driver's
 * ("slot: driver" or "slot: replaced": attach must put back every pointer it replaced), and
 * exits 0. A corrupted heap ends it with SIGABRT instead.
 * build: -lcuda -ldl -lpthread */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static const char *library;

static void on_usr2(int sig) {
    (void)sig;
    stop = 1;
}

/* Allocation-bound work with no system call in its steady state. */
static void *malloc_loop(void *arg) {
    (void)arg;
    void *held[64] = {0};
    unsigned long round = 0;
    while (!stop) {
        unsigned i = (unsigned)(round * 2654435761u) % 64;
        free(held[i]);
        held[i] = aligned_alloc(64, 64 + (round % 97) * 640);
        if (held[i])
            memset(held[i], (int)round, 64);
        if (round % 4096 == 0) {
            CUdeviceptr p = 0;
            CHECK(cuMemAlloc_v2(&p, 4096));
            CHECK(cuMemFree_v2(p));
        }
        round++;
    }
    for (int i = 0; i < 64; i++)
        free(held[i]);
    return NULL;
}

static void *dlopen_loop(void *arg) {
    (void)arg;
    while (!stop) {
        void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
            exit(97);
        }
        KEEP(dlsym(h, "churn_alloc"));
        dlclose(h);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "malloc";
    library = argc > 2 ? argv[2] : NULL;
    signal(SIGUSR2, on_usr2);
    CHECK(cuInit(0));
    CUdeviceptr first = 0;
    CHECK(cuMemAlloc_v2(&first, 64));
    CHECK(cuMemFree_v2(first));
    if (strcmp(mode, "read") == 0) {
        printf("ready\n");
        fflush(stdout);
        char c;
        errno = 0;
        ssize_t n = read(0, &c, 1);
        printf("read %zd byte; errno after successful read: %d\n", n, errno);
        fflush(stdout);
        while (!stop)
            pause();
    } else if (strcmp(mode, "stdio") == 0) {
        printf("ready\n");
        fflush(stdout);
        int c = getchar();
        printf("got %c\n", c);
        fflush(stdout);
        while (!stop)
            pause();
    } else {
        pthread_t second;
        int two = strcmp(mode, "malloc2") == 0 || strcmp(mode, "dlopen") == 0;
        if (two && strcmp(mode, "dlopen") == 0 && !library)
            return 98;
        if (two && pthread_create(&second, NULL, library ? dlopen_loop : malloc_loop, NULL) != 0)
            return 96;
        printf("ready\n");
        fflush(stdout);
        malloc_loop(NULL);
        if (two)
            pthread_join(second, NULL);
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *driver = h ? dlsym(h, "cuMemAlloc_v2") : NULL;
    /* The program's own import of the function: its GOT slot, where attach puts its hook. */
    CUresult (*volatile imported)(CUdeviceptr *, size_t) = cuMemAlloc_v2;
    printf("done\nslot: %s\n", (void *)imported == driver ? "driver" : "replaced");
    return 0;
}
