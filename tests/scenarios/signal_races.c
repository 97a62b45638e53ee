/* signal_races: leaves one 3000-byte block live, prints "ready", then does one thing forever
 * until a test's signal ends it, so the signal lands in the middle of it (issue 21):
 *   alloc_loop   cuMemAlloc_v2/cuMemFree_v2 of 64 bytes: the shim's table locks held
 *   malloc_loop  malloc/free of varied sizes: the C library's arena lock held (run it with
 *                MALLOC_ARENA_MAX=1, so every thread shares the one arena)
 *   phdr_loop    dl_iterate_phdr with a callback that takes its time: the loader lock held
 *   exit N       allocates N more 64-byte blocks, prints "exiting" and returns: a long exit dump
 *   fd_reuse F   after the first CUDA call closes every descriptor above 2 (as daemons do), then
 *                sends 4800 bytes of "sf" through a pipe of its own and appends to file F, prints
 *                "ready", and on a line on stdin appends again and prints how many bytes its pipe
 *                gave back
 * build: -lcuda -ldl */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "nullcuda.h"
#include "scenario.h"

static CUdeviceptr kept;

SITE void alloc_kept(void) {
    CHECK(cuMemAlloc_v2(&kept, 3000)); // @kept
    KEEP(kept);
}

SITE void alloc_many(long n) {
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        CHECK(cuMemAlloc_v2(&p, 64)); // @many
        KEEP(p);
    }
}

static volatile unsigned long sink;

static int slow_callback(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    for (int i = 0; i < 2000; i++)
        sink += (unsigned long)info->dlpi_addr + (unsigned long)i;
    return 0;
}

static void ready(void) {
    printf("ready\n");
    fflush(stdout);
}

static int fd_reuse(const char *path) {
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int p[2];
    if (pipe(p) != 0)
        return 4;
    const char pattern[] = "sfsfsfsfsfsfsfsfsfsfsfsf"; /* 24 bytes: snapshot and fatal requests */
    long got = 0;
    char buf[64];
    /* Never blocks: bytes someone else took are counted as missing, not waited for. */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    for (int round = 0; round < 200; round++) {
        if (write(p[1], pattern, 24) != 24)
            return 5;
        usleep(1000); /* time for anyone else reading our pipe to take the bytes */
        ssize_t n;
        while ((n = read(p[0], buf, sizeof buf)) > 0)
            got += n;
    }
    int f = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (f < 0 || write(f, "program\n", 8) != 8)
        return 6;
    ready();
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 3;
    if (write(f, "end\n", 4) != 4)
        return 7;
    printf("pipe gave back %ld of 4800 bytes\n", got);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    CHECK(cuInit(0));
    alloc_kept();
    if (strcmp(mode, "fd_reuse") == 0)
        return argc > 2 ? fd_reuse(argv[2]) : 2;
    if (strcmp(mode, "exit") == 0) {
        alloc_many(argc > 2 ? atol(argv[2]) : 0);
        printf("exiting\n");
        fflush(stdout);
        return 0;
    }
    ready();
    if (strcmp(mode, "alloc_loop") == 0) {
        for (;;) {
            CUdeviceptr p;
            CHECK(cuMemAlloc_v2(&p, 64));
            CHECK(cuMemFree_v2(p));
        }
    }
    if (strcmp(mode, "malloc_loop") == 0) {
        for (unsigned i = 0;; i++) {
            void *p = malloc(16 + (i % 64) * 48);
            KEEP(p);
            free(p);
        }
    }
    if (strcmp(mode, "phdr_loop") == 0) {
        for (;;)
            dl_iterate_phdr(slow_callback, NULL);
    }
    return 2;
}
