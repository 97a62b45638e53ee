/* next_probe: an LD_PRELOAD interposer of the kind profilers and fault injectors are: it wraps
 * getppid() and finds the real one with dlsym(RTLD_NEXT, ...), from its own constructor-free
 * first call. Under the shim that lookup once crashed (the shim's dlsym searched the loader's list
 * with dlsym on raw link_maps, which preloaded objects cannot take). Prints what it found at exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

typedef pid_t (*getppid_fn)(void);
static getppid_fn real_getppid;
static unsigned long calls;

__attribute__((visibility("default"))) pid_t getppid(void) {
    if (!real_getppid)
        real_getppid = (getppid_fn)dlsym(RTLD_NEXT, "getppid");
    calls++;
    return real_getppid ? real_getppid() : -1;
}

__attribute__((destructor)) static void report(void) {
    Dl_info info;
    const char *where = real_getppid && dladdr((void *)real_getppid, &info) ? info.dli_fname : "nowhere";
    fprintf(stderr, "next_probe: %lu calls, the next getppid in %s\n", calls, where);
}
