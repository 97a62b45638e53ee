/* growth_steps: a training loop that leaks, for snapshot series (report --growth, the HTML
 * timeline). load_model allocates 1 MiB once; each of argv[1] steps (default 24) keeps one
 * 64 KiB block from train_step and one 16 KiB block from cache_fill, allocates and frees a
 * 256 KiB scratch block, and sleeps argv[2] ms (default 25). Nothing is freed at exit: the exit
 * dump holds the model and every kept block. With argv[3] `flat` each step frees its two blocks
 * again: only the model is left at exit, and nothing grows. Tests run it with snapshots.
 * build: -lcudart */
#include "nullcudart.h"
#include "scenario.h"

#include <string.h>
#include <time.h>

#define MAX_STEPS 1000

static void *model;
static void *kept[MAX_STEPS][2];

SITE void load_model(void) {
    CHECK(cudaMalloc(&model, 1 << 20)); // @load_model
    KEEP(model);
}

SITE void train_step(int i) {
    CHECK(cudaMalloc(&kept[i][0], 64 << 10)); // @train_step
    KEEP(kept);
}

SITE void cache_fill(int i) {
    CHECK(cudaMalloc(&kept[i][1], 16 << 10)); // @cache_fill
    KEEP(kept);
}

SITE void scratch(void) {
    void *p = NULL;
    CHECK(cudaMalloc(&p, 256 << 10)); // @scratch
    CHECK(cudaFree(p));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 24;
    int sleep_ms = argc > 2 ? atoi(argv[2]) : 25;
    if (steps < 1 || steps > MAX_STEPS)
        steps = 24;
    int flat = argc > 3 && strcmp(argv[3], "flat") == 0;
    struct timespec pause = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
    load_model();
    for (int i = 0; i < steps; i++) {
        train_step(i);
        cache_fill(i);
        if (flat) {
            CHECK(cudaFree(kept[i][0]));
            CHECK(cudaFree(kept[i][1]));
        }
        scratch();
        nanosleep(&pause, NULL);
    }
    printf("growth_steps: %d steps\n", steps);
    return 0;
}
