/* runtime_requests: replays, on the null driver, the driver lookups a real CUDA runtime made on a
 * GPU (tests/data/runtime-requests/MAJOR-FLAVOUR.tsv, written by `scripts/gpu-matrix.sh spy`: api v1|v2,
 * symbol, cudaVersion, flags, result, the function the real driver returned). For every lookup
 * that succeeded there, it asks the same question through the cuGetProcAddress that
 * dlsym(libcuda, ...) hands out (the static runtime's route) and prints one line:
 *   symbol <TAB> version <TAB> flags <TAB> the real driver's answer <TAB> shim exports it: 0|1
 *     <TAB> what it was handed: NAME@shim | NAME@driver | none
 * The test holds every line whose answer the shim exports to being handed the shim's function
 * of that very name: a versioned entry point the hook table lacks fails it.
 * build: -ldl */
#define _GNU_SOURCE
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>

static const char *owner(void *p, const char **name) {
    Dl_info info;
    *name = "?";
    if (!p || !dladdr(p, &info))
        return "none";
    if (info.dli_sname)
        *name = info.dli_sname;
    return info.dli_fname && strstr(info.dli_fname, "libcudaleak") ? "shim" : "driver";
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    FILE *in = fopen(argv[1], "r");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!in || !h)
        return 97;
    PFN_cuGetProcAddress_v2 gpa2 = (PFN_cuGetProcAddress_v2)dlsym(h, "cuGetProcAddress_v2");
    PFN_cuGetProcAddress_v1 gpa1 = (PFN_cuGetProcAddress_v1)dlsym(h, "cuGetProcAddress");
    if (!gpa1 || !gpa2)
        return 96;
    char line[512];
    while (fgets(line, sizeof line, in)) {
        /* Six tab-separated fields; the symbol may be empty (12.x runtimes ask for "" once). */
        char *field[6];
        int n = 0;
        line[strcspn(line, "\n")] = 0;
        for (char *p = line; n < 6; n++) {
            field[n] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                n++;
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        if (n != 6)
            return 3;
        const char *api = field[0], *symbol = field[1], *answer = field[5];
        int version = atoi(field[2]), result = atoi(field[4]);
        unsigned long long flags = strtoull(field[3], NULL, 10);
        if (result != 0 || !*symbol)
            continue; /* not found on the real driver either, or a probe for no name */
        void *p = NULL;
        int rc;
        if (strcmp(api, "v1") == 0) {
            rc = gpa1(symbol, &p, version, flags);
        } else {
            CUdriverProcAddressQueryResult st;
            rc = gpa2(symbol, &p, version, flags, &st);
            if (st != CU_GET_PROC_ADDRESS_SUCCESS)
                p = NULL;
        }
        if (rc != 0)
            p = NULL;
        const char *exported_name, *handed_name;
        const char *exported_by = owner(dlsym(RTLD_DEFAULT, answer), &exported_name);
        const char *by = owner(p, &handed_name);
        printf("%s\t%d\t%llu\t%s\t%d\t%s@%s\n", symbol, version, flags, answer,
               strcmp(exported_by, "shim") == 0, p ? handed_name : "none", by);
    }
    return 0;
}
