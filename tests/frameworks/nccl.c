/* nccl.c: a stand-in for libnccl.so.2. ncclCommInitRank makes a communicator that owns 1 MiB of
 * buffers from cuMemAlloc_v2, called from an internal function that has no symbol (the library
 * is linked stripped: only the exported API names resolve). ncclCommDestroy and ncclCommAbort
 * each free exactly that block (cuMemFree_v2), the channel buffers and the communicator.
 * ncclAllReduce sets up 2 MiB of channel buffers at a communicator's first collective, as the
 * real one connects lazily; it moves no data. The unique id is passed by value (128 bytes on the
 * stack), as in the real ABI, and ignored.
 * Must never: free anything but in ncclCommDestroy / ncclCommAbort. */
#include "library.h"

#include <stdlib.h>

typedef struct {
    char internal[128];
} ncclUniqueId;

enum { ncclSuccess = 0, ncclSystemError = 2, ncclInternalError = 3, ncclInvalidArgument = 4 };

struct comm {
    int nranks, rank;
    CUdeviceptr buffers, channels;
};

EXPORT int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    KEEP(id.internal[0]);
    struct comm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->nranks = nranks;
    c->rank = rank;
    if (reserve(&c->buffers, 1 << 20) != 0) {
        free(c);
        return ncclSystemError;
    }
    *comm = c;
    KEEP(comm);
    return ncclSuccess;
}

EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int op,
                         void *comm, void *stream) {
    KEEP(send);
    KEEP(recv);
    KEEP(count + (size_t)datatype + (size_t)op);
    KEEP(stream);
    struct comm *c = comm;
    if (!c)
        return ncclInvalidArgument;
    if (!c->channels && reserve(&c->channels, 2 << 20) != 0)
        return ncclSystemError;
    KEEP(c);
    return ncclSuccess;
}

INTERNAL static int teardown(struct comm *c) {
    int rc = release(&c->buffers) == 0 && release(&c->channels) == 0 ? ncclSuccess
                                                                     : ncclInternalError;
    free(c);
    return rc;
}

EXPORT int ncclCommDestroy(void *comm) {
    if (!comm)
        return ncclInvalidArgument;
    int rc = teardown(comm);
    KEEP(rc);
    return rc;
}

EXPORT int ncclCommAbort(void *comm) {
    if (!comm)
        return ncclInvalidArgument;
    int rc = teardown(comm);
    KEEP(rc);
    return rc;
}
