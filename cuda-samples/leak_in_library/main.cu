// leak_in_library/main.cu — a correct program that uses a leaky shared library, libplan.so.
//
// Two plans are created and destroyed properly; libplan.so's plan_destroy forgets each plan's
// workspace. The report must show ONE leak group: 2 allocations, 3 145 728 bytes (1 MiB + 2 MiB),
// via cudaMalloc (device memory), in plan_create at the line marked LEAK-HERE of libplan.cu, in
// the module libplan.so — not in this program.
//
// EXPECT: summary allocations=2 frees=0 live_allocations=2 live_bytes=3145728 failed_allocations=0 invalid_frees=0
// EXPECT: leak file=libplan.cu marker=LEAK-HERE count=2 bytes=3145728 api=cudaMalloc kind=device function=plan_create module=libplan.so
#include <cstdio>
#include "plan.h"

int main() {
    const size_t sizes[] = {1 << 18, 1 << 19}; // floats: 1 MiB and 2 MiB workspaces
    for (size_t n : sizes) {
        Plan *plan = plan_create(n);
        if (!plan) {
            std::fprintf(stderr, "leak_in_library: plan_create(%zu) failed\n", n);
            return 1;
        }
        if (plan_execute(plan) != 0) std::fprintf(stderr, "leak_in_library: plan_execute failed\n");
        plan_destroy(plan);
    }
    std::printf("leak_in_library: 2 plans run\n");
    return 0;
}
