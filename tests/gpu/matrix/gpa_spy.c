/* gpa_spy: what a CUDA runtime asks the driver for. LD_PRELOAD it into a program (no cudaleak);
 * every cuGetProcAddress / cuGetProcAddress_v2 call the runtime makes, and the name of the
 * function the driver handed back (dladdr), is appended to $GPA_SPY_LOG as one line:
 *   v1|v2 <TAB> symbol <TAB> cudaVersion <TAB> flags <TAB> result <TAB> returned function
 * The runtime binds cuGetProcAddress_v2 with dlsym(handle, ...), which LD_PRELOAD alone does not
 * see, so dlsym is interposed too (found through dlvsym, as the shim does).
 * Built and run by scripts/gpu-matrix.sh spy: gcc -shared -fPIC -o gpa_spy.so gpa_spy.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*gpa_v1)(const char *, void **, int, uint64_t);
typedef int (*gpa_v2)(const char *, void **, int, uint64_t, int *);
typedef void *(*dlsym_fn)(void *, const char *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gpa_v1 real_v1;
static gpa_v2 real_v2;
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status);

static dlsym_fn real_dlsym(void) {
    static dlsym_fn fn;
    if (!fn)
        fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!fn)
        fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return fn;
}

static void note(const char *api, const char *symbol, int version, uint64_t flags, int rc, void *p) {
    const char *path = getenv("GPA_SPY_LOG");
    Dl_info info;
    const char *name = p && dladdr(p, &info) && info.dli_sname ? info.dli_sname : (p ? "?" : "-");
    pthread_mutex_lock(&lock);
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s\t%s\t%d\t%llu\t%d\t%s\n", api, symbol ? symbol : "(null)", version,
                (unsigned long long)flags, rc, name);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

static void *driver(void) {
    static void *h;
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW);
    return h;
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    if (!real_v1)
        real_v1 = (gpa_v1)real_dlsym()(driver(), "cuGetProcAddress");
    int rc = real_v1 ? real_v1(symbol, pfn, version, flags) : 999;
    note("v1", symbol, version, flags, rc, rc == 0 && pfn ? *pfn : NULL);
    if (rc == 0 && pfn && symbol && strcmp(symbol, "cuGetProcAddress") == 0)
        *pfn = version < 12000 ? (void *)cuGetProcAddress : (void *)cuGetProcAddress_v2;
    return rc;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    if (!real_v2)
        real_v2 = (gpa_v2)real_dlsym()(driver(), "cuGetProcAddress_v2");
    int rc = real_v2 ? real_v2(symbol, pfn, version, flags, status) : 999;
    note("v2", symbol, version, flags, rc == 0 && status && *status ? 1000 + *status : rc,
         rc == 0 && pfn ? *pfn : NULL);
    if (rc == 0 && pfn && *pfn && symbol && strcmp(symbol, "cuGetProcAddress") == 0)
        *pfn = version < 12000 ? (void *)cuGetProcAddress : (void *)cuGetProcAddress_v2;
    return rc;
}

void *dlsym(void *handle, const char *symbol) {
    if (strcmp(symbol, "cuGetProcAddress_v2") == 0)
        return (void *)cuGetProcAddress_v2;
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return (void *)cuGetProcAddress;
    return real_dlsym()(handle, symbol);
}
