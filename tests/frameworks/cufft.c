/* cufft.c: a stand-in for libcufft.so.12. Plans are ints (ids from 1, the lowest free one
 * first, reused after cufftDestroy) in a static table. cufftCreate takes no device memory;
 * cufftMakePlan1d gives the plan a work area of nx * 8 * batch bytes from cuMemAlloc_v2, called
 * from an internal function that has no symbol (the library is linked stripped). cufftPlan1d
 * calls the exported cufftCreate and cufftMakePlan1d through the PLT, as real libraries call
 * their own API. cufftDestroy frees exactly the plan's work area (cuMemFree_v2).
 * Must never: free anything but in cufftDestroy (or a cufftPlan1d whose plan fails). */
#include "library.h"

#include <pthread.h>
#include <stddef.h>

enum { CUFFT_SUCCESS = 0, CUFFT_INVALID_PLAN = 1, CUFFT_ALLOC_FAILED = 2, CUFFT_INVALID_SIZE = 8 };

#define PLANS 1024

struct plan {
    int used, made;
    CUdeviceptr work;
};

static struct plan plans[PLANS]; /* plan id p is plans[p - 1] */
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

/* The plan with id `id`, or NULL if there is none. Called with plans_lock held. */
static struct plan *lookup(int id) {
    if (id < 1 || id > PLANS || !plans[id - 1].used)
        return NULL;
    return &plans[id - 1];
}

EXPORT int cufftCreate(int *plan) {
    if (!plan)
        return CUFFT_INVALID_PLAN;
    pthread_mutex_lock(&plans_lock);
    int id = 0;
    for (int i = 0; i < PLANS && !id; i++)
        if (!plans[i].used) {
            plans[i] = (struct plan){.used = 1};
            id = i + 1;
        }
    pthread_mutex_unlock(&plans_lock);
    if (!id)
        return CUFFT_ALLOC_FAILED;
    *plan = id;
    return CUFFT_SUCCESS;
}

/* `type` is a cufftType (an int-sized enum); the work area does not depend on it. */
EXPORT int cufftMakePlan1d(int plan, int nx, int type, int batch, size_t *work_size) {
    if (nx <= 0 || batch <= 0)
        return CUFFT_INVALID_SIZE;
    KEEP(type);
    size_t size = (size_t)nx * 8 * (size_t)batch;
    pthread_mutex_lock(&plans_lock);
    struct plan *p = lookup(plan);
    int rc = CUFFT_INVALID_PLAN;
    if (p && !p->made) {
        rc = reserve(&p->work, size) == 0 ? CUFFT_SUCCESS : CUFFT_ALLOC_FAILED;
        p->made = rc == CUFFT_SUCCESS;
    }
    pthread_mutex_unlock(&plans_lock);
    if (rc == CUFFT_SUCCESS && work_size)
        *work_size = size;
    return rc;
}

EXPORT int cufftDestroy(int plan) {
    pthread_mutex_lock(&plans_lock);
    struct plan *p = lookup(plan);
    int rc = CUFFT_INVALID_PLAN;
    if (p) {
        rc = release(&p->work) == 0 ? CUFFT_SUCCESS : CUFFT_INVALID_PLAN;
        *p = (struct plan){0};
    }
    pthread_mutex_unlock(&plans_lock);
    return rc;
}

/* Calls the exported functions: with -fPIC and default semantic interposition the calls go
 * through the PLT, so an interposer of cufftCreate / cufftMakePlan1d sees them too. */
EXPORT int cufftPlan1d(int *plan, int nx, int type, int batch) {
    int rc = cufftCreate(plan);
    if (rc != CUFFT_SUCCESS)
        return rc;
    rc = cufftMakePlan1d(*plan, nx, type, batch, NULL);
    if (rc != CUFFT_SUCCESS)
        cufftDestroy(*plan);
    KEEP(plan);
    return rc;
}
