/* spy.c: libcallspy.so, an LD_PRELOAD library for tests of the null runtime itself.
 *
 * Logs, one line each to the file named by NULLCUDA_SPY_LOG, how a program reaches the driver:
 * `dlopen NAME FLAGS`, `dlsym NAME` (cu* names only) and `getproc NAME VERSION FLAGS` for
 * every cuGetProcAddress(_v2) lookup, following the returned cuGetProcAddress pointers.
 * Must never: change what any call returns, except to hand out its own logging wrappers
 * for cuGetProcAddress and cuGetProcAddress_v2. */
#define _GNU_SOURCE
#include "nullcuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlopen_fn)(const char *, int);

static dlsym_fn real_dlsym;
static dlopen_fn real_dlopen;
static PFN_cuGetProcAddress_v2 real_gpa2;
static PFN_cuGetProcAddress_v1 real_gpa1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void bootstrap(void) {
    if (!real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (!real_dlopen)
        real_dlopen = (dlopen_fn)real_dlsym(RTLD_NEXT, "dlopen");
}

static void say(const char *fmt, const char *name, long a, long b) {
    const char *path = getenv("NULLCUDA_SPY_LOG");
    if (!path)
        return;
    pthread_mutex_lock(&log_lock);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, fmt, name ? name : "(null)", a, b);
        fputc('\n', f);
        fclose(f);
    }
    pthread_mutex_unlock(&log_lock);
}

static CUresult spy_gpa2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static CUresult spy_gpa1(const char *, void **, int, cuuint64_t);

static void swap(const char *symbol, void **pfn) {
    if (!symbol || !pfn || !*pfn || strcmp(symbol, "cuGetProcAddress") != 0)
        return;
    if (*pfn == (void *)real_dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2") || *pfn == (void *)real_gpa2) {
        real_gpa2 = (PFN_cuGetProcAddress_v2)*pfn;
        *pfn = (void *)spy_gpa2;
    } else {
        real_gpa1 = (PFN_cuGetProcAddress_v1)*pfn;
        *pfn = (void *)spy_gpa1;
    }
}

static CUresult spy_gpa2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                         CUdriverProcAddressQueryResult *status) {
    say("getproc %s %ld %ld", symbol, version, (long)flags);
    CUresult r = real_gpa2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS)
        swap(symbol, pfn);
    return r;
}

static CUresult spy_gpa1(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    say("getproc1 %s %ld %ld", symbol, version, (long)flags);
    CUresult r = real_gpa1(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS)
        swap(symbol, pfn);
    return r;
}

EXPORT void *dlopen(const char *name, int flags) {
    bootstrap();
    if (name && strncmp(name, "libcuda", 7) == 0)
        say("dlopen %s %ld", name, flags, 0);
    return real_dlopen(name, flags);
}

EXPORT void *dlsym(void *handle, const char *name) {
    bootstrap();
    void *fn = real_dlsym(handle, name);
    if (name[0] == 'c' && name[1] == 'u' && (name[2] < 'a' || name[2] > 'z')) {
        say("dlsym %s", name, 0, 0);
        if (fn && strcmp(name, "cuGetProcAddress_v2") == 0) {
            real_gpa2 = (PFN_cuGetProcAddress_v2)fn;
            return (void *)spy_gpa2;
        }
        if (fn && strcmp(name, "cuGetProcAddress") == 0) {
            real_gpa1 = (PFN_cuGetProcAddress_v1)fn;
            return (void *)spy_gpa1;
        }
    }
    return fn;
}
