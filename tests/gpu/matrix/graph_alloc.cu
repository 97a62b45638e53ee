// graph_alloc.cu — CUDA graph memory as each runtime release instantiates it (issue 45). CUDA
// 11.x's cudaGraphInstantiate reaches the driver as cuGraphInstantiate_v2, 12.x's and 13.x's as
// cuGraphInstantiateWithFlags: whichever it is, the shim must learn what launches of the
// executable allocate. Three graphs, each with an allocation node:
//   kept:  launched once, its memory never freed — the one leak, made where the node was added;
//   freed: the node's memory freed by a free node in the same graph, launched three times;
//   later: launched once, its memory freed afterwards with cudaFree.
// Not in cuda-samples/: the null-device runtime the CI tests run those against has no graphs.
// Built and checked for every release by scripts/gpu-matrix.sh.
//
// EXPECT: summary allocations=2 frees=1 live_allocations=1 live_bytes=1048576 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=KEPT-NODE count=1 bytes=1048576 kind=graph function=add_kept_node
#include "check.h"

static cudaMemAllocNodeParams params(size_t size) {
    cudaMemAllocNodeParams p = {};
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = size;
    return p;
}

void *add_kept_node(cudaGraph_t g, cudaGraphNode_t *node) {
    cudaMemAllocNodeParams p = params(1 << 20);
    CHECK(cudaGraphAddMemAllocNode(node, g, nullptr, 0, &p)); // KEPT-NODE
    return p.dptr;
}

void *add_node(cudaGraph_t g, cudaGraphNode_t *node, size_t size) {
    cudaMemAllocNodeParams p = params(size);
    CHECK(cudaGraphAddMemAllocNode(node, g, nullptr, 0, &p));
    return p.dptr;
}

// graph_alloc_ptds.cu defines GRAPH_ALLOC_WITH_PARAMS and includes this file.
static cudaGraphExec_t instantiate(cudaGraph_t g) {
    cudaGraphExec_t e;
#if defined(GRAPH_ALLOC_WITH_PARAMS) && CUDART_VERSION >= 12000
    cudaGraphInstantiateParams p = {};
    CHECK(cudaGraphInstantiateWithParams(&e, g, &p));
#elif defined(GRAPH_ALLOC_WITH_PARAMS)
    CHECK(cudaGraphInstantiateWithFlags(&e, g, 0));
#elif CUDART_VERSION >= 12000
    CHECK(cudaGraphInstantiate(&e, g, 0));
#else
    CHECK(cudaGraphInstantiate(&e, g, nullptr, nullptr, 0));
#endif
    return e;
}

int main() {
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaGraphNode_t node, free_node;

    cudaGraph_t kept;
    CHECK(cudaGraphCreate(&kept, 0));
    add_kept_node(kept, &node);
    cudaGraphExec_t kept_exec = instantiate(kept);
    CHECK(cudaGraphLaunch(kept_exec, s));

    cudaGraph_t freed;
    CHECK(cudaGraphCreate(&freed, 0));
    void *f = add_node(freed, &node, 2 << 20);
    CHECK(cudaGraphAddMemFreeNode(&free_node, freed, &node, 1, f));
    cudaGraphExec_t freed_exec = instantiate(freed);
    for (int i = 0; i < 3; i++) CHECK(cudaGraphLaunch(freed_exec, s));

    cudaGraph_t later;
    CHECK(cudaGraphCreate(&later, 0));
    void *l = add_node(later, &node, 3 << 20);
    cudaGraphExec_t later_exec = instantiate(later);
    CHECK(cudaGraphLaunch(later_exec, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(l));

    CHECK(cudaGraphExecDestroy(kept_exec));
    CHECK(cudaGraphExecDestroy(freed_exec));
    CHECK(cudaGraphExecDestroy(later_exec));
    CHECK(cudaGraphDestroy(kept));
    CHECK(cudaGraphDestroy(freed));
    CHECK(cudaGraphDestroy(later));
    CHECK(cudaStreamDestroy(s));
    return 0;
}
