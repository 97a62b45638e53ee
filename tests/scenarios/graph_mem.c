/* graph_mem: CUDA graph memory, reached by argv[1]'s route — `export` (the functions linked by
 * name, -lcuda's way), `getproc` (dlopen + cuGetProcAddress_v2 by base name, as cudart 12/13
 * does, with "cuGraphInstantiate" at 12000 standing for cuGraphInstantiateWithFlags) or `dlsym`
 * (dlsym of each ELF name). argv[2] is `leak` or `clean`. What it does:
 *   A. an allocation node of 1 MiB with no free node: launched, freed with cuMemFree, launched
 *      again — and in `leak` mode not freed after the second launch;
 *   B. an allocation node of 2 MiB and its free node in the same graph, launched three times;
 *   C. a stream capture of cuMemAllocAsync (3 MiB) left unfreed in the graph, and of an
 *      allocation (4 MiB) freed inside the capture: launched once; in `clean` mode the 3 MiB is
 *      freed afterwards with cuMemFreeAsync;
 *   D. a 5 MiB cuMemAlloc_v2 block freed by a captured cuMemFreeAsync, at the graph's launch;
 *   E. an allocation node of 6 MiB in a graph that is instantiated but never launched.
 * `leak` leaves A's 1 MiB (made where node A was added) and C's 3 MiB (made where it was
 * captured); `clean` leaves nothing. argv[3], optional, is the form graphs are instantiated
 * with: `flags` (the default: cuGraphInstantiateWithFlags, the base name at 12000), `v2` (the
 * CUDA 11 cuGraphInstantiate_v2, base name at 11000, as an 11.x runtime's cudaGraphInstantiate
 * calls it), `v1` (cuGraphInstantiate, at 10000) or `params_ptsz`
 * (cuGraphInstantiateWithParams_ptsz, per-thread default stream).
 * build: -ldl -lcuda */
#include "nullcuda.h"
#include "scenario.h"

#include <dlfcn.h>
#include <string.h>

static struct {
    PFN_cuInit init;
    CUresult (*ctxCreate)(CUcontext *, unsigned, CUdevice);
    CUresult (*streamCreate)(CUstream *, unsigned);
    PFN_cuMemAlloc memAlloc;
    PFN_cuMemFree memFree;
    PFN_cuMemAllocAsync memAllocAsync;
    PFN_cuMemFreeAsync memFreeAsync;
    CUresult (*graphCreate)(CUgraph *, unsigned);
    PFN_cuGraphAddMemAllocNode addAllocNode;
    CUresult (*addFreeNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
    PFN_cuGraphInstantiateWithFlags instantiateWithFlags;
    PFN_cuGraphInstantiate_v2 instantiateLegacy;
    PFN_cuGraphInstantiateWithParams instantiateWithParams;
    PFN_cuGraphLaunch launch;
    CUresult (*execDestroy)(CUgraphExec);
    CUresult (*beginCapture)(CUstream, int);
    CUresult (*endCapture)(CUstream, CUgraph *);
} cu;

static const char *route, *form = "flags";
static void *handle;
static PFN_cuGetProcAddress_v2 gpa2;

static void *get_with(const char *base, const char *elf, int version, cuuint64_t flags) {
    void *fn = NULL;
    if (strcmp(route, "dlsym") == 0) {
        fn = dlsym(handle, elf);
    } else {
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CHECK(gpa2(base, &fn, version, flags, &status));
    }
    if (!fn) {
        fprintf(stderr, "graph_mem: no %s\n", elf);
        exit(97);
    }
    return fn;
}

static void *get(const char *base, const char *elf, int version) { return get_with(base, elf, version, 0); }

/* The instantiation form argv[3] names. */
static CUresult instantiate(CUgraphExec *e, CUgraph g) {
    if (strcmp(form, "v1") == 0 || strcmp(form, "v2") == 0) {
        char log[64];
        CUgraphNode error_node;
        return cu.instantiateLegacy(e, g, &error_node, log, sizeof log);
    }
    if (strcmp(form, "params_ptsz") == 0) {
        CUDA_GRAPH_INSTANTIATE_PARAMS params;
        memset(&params, 0, sizeof params);
        return cu.instantiateWithParams(e, g, &params);
    }
    return cu.instantiateWithFlags(e, g, 0);
}

static void resolve(void) {
    if (strcmp(route, "export") == 0) { /* linked by name: the program's own references */
        cu.init = cuInit;
        cu.ctxCreate = cuCtxCreate_v2;
        cu.streamCreate = cuStreamCreate;
        cu.memAlloc = cuMemAlloc_v2;
        cu.memFree = cuMemFree_v2;
        cu.memAllocAsync = cuMemAllocAsync;
        cu.memFreeAsync = cuMemFreeAsync;
        cu.graphCreate = cuGraphCreate;
        cu.addAllocNode = cuGraphAddMemAllocNode;
        cu.addFreeNode = cuGraphAddMemFreeNode;
        cu.instantiateWithFlags = cuGraphInstantiateWithFlags;
        cu.instantiateLegacy = strcmp(form, "v1") == 0 ? cuGraphInstantiate : cuGraphInstantiate_v2;
        cu.instantiateWithParams = cuGraphInstantiateWithParams_ptsz;
        cu.launch = cuGraphLaunch;
        cu.execDestroy = cuGraphExecDestroy;
        cu.beginCapture = cuStreamBeginCapture_v2;
        cu.endCapture = cuStreamEndCapture;
        return;
    }
    handle = dlopen("libcuda.so.1", RTLD_NOW);
    if (!handle)
        exit(96);
    gpa2 = (PFN_cuGetProcAddress_v2)dlsym(handle, "cuGetProcAddress_v2");
    cu.init = get("cuInit", "cuInit", 2000);
    cu.ctxCreate = get("cuCtxCreate", "cuCtxCreate_v2", 3020);
    cu.streamCreate = get("cuStreamCreate", "cuStreamCreate", 2000);
    cu.memAlloc = get("cuMemAlloc", "cuMemAlloc_v2", 3020);
    cu.memFree = get("cuMemFree", "cuMemFree_v2", 3020);
    cu.memAllocAsync = get("cuMemAllocAsync", "cuMemAllocAsync", 11020);
    cu.memFreeAsync = get("cuMemFreeAsync", "cuMemFreeAsync", 11020);
    cu.graphCreate = get("cuGraphCreate", "cuGraphCreate", 10000);
    cu.addAllocNode = get("cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode", 11040);
    cu.addFreeNode = get("cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode", 11040);
    cu.instantiateWithFlags = get("cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000);
    if (strcmp(form, "v1") == 0)
        cu.instantiateLegacy = get("cuGraphInstantiate", "cuGraphInstantiate", 10000);
    else
        cu.instantiateLegacy = get("cuGraphInstantiate", "cuGraphInstantiate_v2", 11000);
    cu.instantiateWithParams = get_with("cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz", 12000,
                                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    cu.launch = get("cuGraphLaunch", "cuGraphLaunch", 10000);
    cu.execDestroy = get("cuGraphExecDestroy", "cuGraphExecDestroy", 10000);
    cu.beginCapture = get("cuStreamBeginCapture", "cuStreamBeginCapture_v2", 10010);
    cu.endCapture = get("cuStreamEndCapture", "cuStreamEndCapture", 10000);
}

static CUstream stream;

SITE CUdeviceptr add_alloc_node(CUgraph g, CUgraphNode *node, size_t size) {
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = 1;
    p.poolProps.location.type = 1;
    p.bytesize = size;
    CHECK(cu.addAllocNode(node, g, NULL, 0, &p)); // @alloc_node
    return p.dptr;
}

/* A: a node the graph does not free; the program frees each launch's memory itself. */
SITE void graph_a(int leak) {
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CHECK(cu.graphCreate(&g, 0));
    CUdeviceptr a = add_alloc_node(g, &n, 1 << 20);
    CHECK(instantiate(&e, g));
    CHECK(cu.launch(e, stream));
    CHECK(cu.memFree(a));
    CHECK(cu.launch(e, stream));
    if (!leak)
        CHECK(cu.memFree(a));
    CHECK(cu.execDestroy(e));
}

/* B: allocated and freed inside the graph. */
SITE void graph_b(void) {
    CUgraph g;
    CUgraphNode n, f;
    CUgraphExec e;
    CHECK(cu.graphCreate(&g, 0));
    CUdeviceptr b = add_alloc_node(g, &n, 2 << 20);
    CHECK(cu.addFreeNode(&f, g, &n, 1, b));
    CHECK(instantiate(&e, g));
    for (int i = 0; i < 3; i++)
        CHECK(cu.launch(e, stream));
    CHECK(cu.execDestroy(e));
}

SITE CUdeviceptr captured_alloc(size_t size) {
    CUdeviceptr p = 0;
    CHECK(cu.memAllocAsync(&p, size, stream)); // @captured_alloc
    return p;
}

/* C and D: a stream capture. */
SITE void graph_cd(int leak) {
    CUdeviceptr d = 0;
    CHECK(cu.memAlloc(&d, 5 << 20));
    CHECK(cu.beginCapture(stream, 0));
    CUdeviceptr c = captured_alloc(3 << 20);
    CUdeviceptr tmp = captured_alloc(4 << 20);
    CHECK(cu.memFreeAsync(tmp, stream));
    CHECK(cu.memFreeAsync(d, stream));
    CUgraph g;
    CHECK(cu.endCapture(stream, &g));
    CUgraphExec e;
    CHECK(instantiate(&e, g));
    CHECK(cu.launch(e, stream));
    if (!leak)
        CHECK(cu.memFreeAsync(c, stream));
}

/* E: never launched. */
SITE void graph_e(void) {
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CHECK(cu.graphCreate(&g, 0));
    add_alloc_node(g, &n, 6 << 20);
    CHECK(instantiate(&e, g));
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    route = argv[1];
    int leak = strcmp(argv[2], "leak") == 0;
    if (argc > 3)
        form = argv[3];
    resolve();
    CUcontext ctx;
    CHECK(cu.init(0));
    CHECK(cu.ctxCreate(&ctx, 0, 0));
    CHECK(cu.streamCreate(&stream, 0));
    graph_a(leak);
    graph_b();
    graph_cd(leak);
    graph_e();
    printf("route=%s %s\n", route, leak ? "leaked 2" : "clean");
    return 0;
}
