/* pause: a program that knows about cudaleak pauses recording around one phase through
 * cudaleak_set_recording, looked up with dlsym(RTLD_DEFAULT, …) so it also runs without the shim.
 * Prints each call's return value ("was recording").
 * build: -lcuda -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "nullcuda.h"
#include "scenario.h"

typedef int (*set_recording_fn)(int);

SITE void before(CUdeviceptr *p) {
    CHECK(cuMemAlloc_v2(p, 1000)); // @before_pause
}

SITE void during(CUdeviceptr *p) {
    CHECK(cuMemAlloc_v2(p, 2000)); // @during_pause
}

SITE void after(CUdeviceptr *p) {
    CHECK(cuMemAlloc_v2(p, 3000)); // @after_pause
}

int main(void) {
    CHECK(cuInit(0));
    set_recording_fn set = (set_recording_fn)dlsym(RTLD_DEFAULT, "cudaleak_set_recording");
    CUdeviceptr a, b, c, d;
    before(&a);
    if (set) printf("pause: %d\n", set(0));
    if (set) printf("pause again: %d\n", set(0));
    during(&b);
    CHECK(cuMemFree_v2(a)); /* freed while paused: unseen, so a stays listed */
    if (set) printf("resume: %d\n", set(1));
    after(&c);
    CHECK(cuMemAlloc_v2(&d, 10));
    CHECK(cuMemFree_v2(d));
    printf("%s\n", set ? "with shim" : "without shim");
    return 0;
}
