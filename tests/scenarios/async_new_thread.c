/* async_new_thread: cudaMallocAsync from a thread the runtime has not bound a context to yet.
 * With NULLCUDA_ASYNC_NEEDS_CONTEXT=1 the driver refuses (201) and the runtime binds the primary
 * context and retries, as the real runtime does (seen on the H200 on PyTorch's autograd thread):
 * the program is told success, so no failed allocation may be reported. Both blocks are kept.
 * build: -lcudart -lpthread */
#include "nullcudart.h"
#include "scenario.h"

#include <pthread.h>

static void *kept[2];

SITE void *worker(void *arg) {
    int rc = cudaMallocAsync(&kept[1], 8192, 0); // @worker
    printf("thread rc=%d\n", rc);
    return arg;
}

int main(void) {
    int rc = cudaMallocAsync(&kept[0], 4096, 0); // @main
    printf("main rc=%d\n", rc);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 1;
    pthread_join(t, NULL);
    KEEP(kept[0]);
    KEEP(kept[1]);
    return 0;
}
