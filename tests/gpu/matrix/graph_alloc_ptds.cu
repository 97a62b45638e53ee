// graph_alloc_ptds.cu — graph_alloc.cu built for the per-thread default stream (issue 45): the
// runtime reaches the driver's `_ptsz` forms, and from CUDA 12 on the graphs are instantiated
// with cudaGraphInstantiateWithParams (the driver's cuGraphInstantiateWithParams_ptsz); CUDA
// 11.8 has no WithParams and uses cudaGraphInstantiateWithFlags. The same three graphs, the same
// one leak, at graph_alloc.cu's line. Built and checked for every release by
// scripts/gpu-matrix.sh.
// BUILD: --default-stream per-thread
//
// EXPECT: summary allocations=2 frees=1 live_allocations=1 live_bytes=1048576 failed_allocations=0 invalid_frees=0
// EXPECT: leak marker=KEPT-NODE file=graph_alloc.cu count=1 bytes=1048576 kind=graph function=add_kept_node
#define GRAPH_ALLOC_WITH_PARAMS
#include "graph_alloc.cu"
