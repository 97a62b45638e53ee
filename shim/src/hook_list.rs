//! The one list of hooked functions: one row each, from which `crate::api` makes the [`Api`]
//! names, `hooks::driver` the hook table, the exported driver hooks and their typed real
//! functions, and `hooks::runtime` the runtime forwards. Nothing else restates a hook.
//!
//! `hooked!(callback)` hands the whole list to the macro `callback`, which takes what it needs.
//! A row:
//! - driver (recorded under its own name, in the order of [`Api`], which the format crate's
//!   table of operations follows): `name(base_name since_cuda_version [ptsz]) Op fn(C
//!   parameters) => module::body(arguments after the API and the call)`;
//! - unlabelled (driver functions that record under no name): the same without `Op`;
//! - runtime (label-only forwards): `name Op fn(C parameters) => forward_method(arguments)`;
//! - libraries (handle lifecycles, `hooks::libraries`): `library: name role fn(C parameters) =>
//!   handle parameter`, where the role is `create` (the parameter points to where the new handle
//!   is written), `destroy`, or `using` (a call that names the handle and may allocate for it).
//!
//! Every C parameter is passed on unchanged to the real function; the body is given the call of
//! the real function, the hook's API name and what it needs of the parameters. Those arguments
//! are evaluated inside the hook's one `unsafe` call of its body: keep them to names, casts and
//! arithmetic (a dereference belongs in the body, under its own SAFETY comment).
//!
//! [`Api`]: crate::api::Api

macro_rules! hooked {
    ($callback:ident) => {
        $callback! {
            driver {
                // Device, managed and host memory.
                cuMemAlloc_v2("cuMemAlloc" 3020) AllocDevice
                    fn(dptr: *mut DevPtr, bytesize: usize)
                    => memory::alloc(dptr, bytesize as u64, current_device);
                cuMemAllocPitch_v2("cuMemAllocPitch" 3020) AllocPitch
                    fn(dptr: *mut DevPtr, pitch: *mut usize, width: usize, height: usize, element_size: c_uint)
                    => memory::alloc_pitch(dptr, pitch, width, height);
                cuMemFree_v2("cuMemFree" 3020) FreeDevice
                    fn(dptr: DevPtr)
                    => memory::free(dptr);
                cuMemAllocManaged("cuMemAllocManaged" 6000) AllocManaged
                    fn(dptr: *mut DevPtr, bytesize: usize, flags: c_uint)
                    => memory::alloc(dptr, bytesize as u64, current_device);
                cuMemAllocHost_v2("cuMemAllocHost" 3020) AllocHost
                    fn(pp: *mut *mut c_void, bytesize: usize)
                    => memory::alloc(pp as *const u64, bytesize as u64, no_device);
                cuMemHostAlloc("cuMemHostAlloc" 2020) AllocHost
                    fn(pp: *mut *mut c_void, bytesize: usize, flags: c_uint)
                    => memory::alloc(pp as *const u64, bytesize as u64, no_device);
                cuMemFreeHost("cuMemFreeHost" 2000) FreeHost
                    fn(p: *mut c_void)
                    => memory::free(p as u64);
                // Stream-ordered allocation.
                cuMemAllocAsync("cuMemAllocAsync" 11020) AllocAsync
                    fn(dptr: *mut DevPtr, bytesize: usize, stream: Stream)
                    => pools::alloc(dptr, bytesize as u64, stream);
                cuMemAllocAsync_ptsz("cuMemAllocAsync" 11020 ptsz) AllocAsync
                    fn(dptr: *mut DevPtr, bytesize: usize, stream: Stream)
                    => pools::alloc(dptr, bytesize as u64, stream);
                cuMemFreeAsync("cuMemFreeAsync" 11020) FreeAsync
                    fn(dptr: DevPtr, stream: Stream)
                    => pools::free(dptr, stream);
                cuMemFreeAsync_ptsz("cuMemFreeAsync" 11020 ptsz) FreeAsync
                    fn(dptr: DevPtr, stream: Stream)
                    => pools::free(dptr, stream);
                cuMemAllocFromPoolAsync("cuMemAllocFromPoolAsync" 11020) AllocFromPool
                    fn(dptr: *mut DevPtr, bytesize: usize, pool: *mut c_void, stream: Stream)
                    => pools::alloc(dptr, bytesize as u64, stream);
                cuMemAllocFromPoolAsync_ptsz("cuMemAllocFromPoolAsync" 11020 ptsz) AllocFromPool
                    fn(dptr: *mut DevPtr, bytesize: usize, pool: *mut c_void, stream: Stream)
                    => pools::alloc(dptr, bytesize as u64, stream);
                // Physical memory (virtual memory management).
                cuMemCreate("cuMemCreate" 10020) AllocPhysical
                    fn(handle: *mut u64, size: usize, prop: *const c_void, flags: u64)
                    => vmm::create(handle, size as u64, prop);
                cuMemRelease("cuMemRelease" 10020) FreePhysical
                    fn(handle: u64)
                    => memory::free(handle);
                // Arrays.
                cuArrayCreate_v2("cuArrayCreate" 3020) AllocArray
                    fn(array: *mut *mut c_void, desc: *const ArrayDescriptor)
                    => arrays::create(array, desc);
                cuArray3DCreate_v2("cuArray3DCreate" 3020) AllocArray
                    fn(array: *mut *mut c_void, desc: *const Array3dDescriptor)
                    => arrays::create_3d(array, desc);
                cuArrayDestroy("cuArrayDestroy" 2000) FreeArray
                    fn(array: *mut c_void)
                    => memory::free(array as u64);
                // Graphs.
                cuGraphLaunch("cuGraphLaunch" 10000) AllocGraph
                    fn(exec: GraphExec, stream: Stream)
                    => graphs::launch(exec);
                cuGraphLaunch_ptsz("cuGraphLaunch" 10000 ptsz) AllocGraph
                    fn(exec: GraphExec, stream: Stream)
                    => graphs::launch(exec);
                cuGraphAddMemAllocNode("cuGraphAddMemAllocNode" 11040) GraphNode
                    fn(node: *mut GraphNode, graph: Graph, dependencies: *const GraphNode,
                       dependency_count: usize, params: *mut MemAllocNodeParams)
                    => graphs::add_alloc_node(params);
                // Registered host memory, IPC and virtual memory (issue 12). The _v2 functions
                // have the same C signature as the first ones; both are exported, so both are
                // wrapped.
                cuMemHostRegister("cuMemHostRegister" 4000) Register
                    fn(p: *mut c_void, bytesize: usize, flags: c_uint)
                    => memory::host_register(p, bytesize as u64);
                cuMemHostRegister_v2("cuMemHostRegister" 6050) Register
                    fn(p: *mut c_void, bytesize: usize, flags: c_uint)
                    => memory::host_register(p, bytesize as u64);
                cuMemHostUnregister("cuMemHostUnregister" 4000) Unregister
                    fn(p: *mut c_void)
                    => memory::free(p as u64);
                cuIpcOpenMemHandle("cuIpcOpenMemHandle" 4010) IpcOpen
                    fn(dptr: *mut DevPtr, handle: IpcMemHandle, flags: c_uint)
                    => ipc::open(dptr);
                cuIpcOpenMemHandle_v2("cuIpcOpenMemHandle" 11000) IpcOpen
                    fn(dptr: *mut DevPtr, handle: IpcMemHandle, flags: c_uint)
                    => ipc::open(dptr);
                cuIpcCloseMemHandle("cuIpcCloseMemHandle" 4010) IpcClose
                    fn(dptr: DevPtr)
                    => memory::free(dptr);
                // Recorded in the device space: the program frees it with cuMemFree(Async).
                cuMemPoolImportPointer("cuMemPoolImportPointer" 11020) ImportPointer
                    fn(dptr: *mut DevPtr, pool: *mut c_void, share_data: *mut c_void)
                    => ipc::open(dptr);
                // Address space, no memory: recorded with its size, counted in no byte total.
                cuMemAddressReserve("cuMemAddressReserve" 10020) Reserve
                    fn(dptr: *mut DevPtr, size: usize, alignment: usize, addr: DevPtr, flags: u64)
                    => memory::alloc(dptr, size as u64, no_device);
                cuMemAddressFree("cuMemAddressFree" 10020) AddressFree
                    fn(dptr: DevPtr, size: usize)
                    => memory::free(dptr);
                cuMemMap("cuMemMap" 10020) Map
                    fn(dptr: DevPtr, size: usize, offset: usize, handle: u64, flags: u64)
                    => vmm::map(dptr, size as u64, handle);
                // Unmaps every mapping that starts in `dptr..dptr + size`.
                cuMemUnmap("cuMemUnmap" 10020) Unmap
                    fn(dptr: DevPtr, size: usize)
                    => vmm::unmap(dptr, size as u64);
            }
            unlabelled {
                // The runtime's way to the driver: hands out our hooks in place of the driver's.
                cuGetProcAddress("cuGetProcAddress" 11030)
                    fn(symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64)
                    => proc::get_proc_address(symbol, pfn, cuda_version, flags);
                cuGetProcAddress_v2("cuGetProcAddress" 12000)
                    fn(symbol: *const c_char, pfn: *mut *mut c_void, cuda_version: c_int, flags: u64,
                       status: *mut c_int)
                    => proc::get_proc_address(symbol, pfn, cuda_version, flags);
                // What launches of a graph will allocate and free is learnt here, in every form a
                // runtime asks for (tests/data/runtime-requests/): the CUDA 10 and 11 ABI (an
                // error node and a log buffer), which 11.x's cudaGraphInstantiate calls and every
                // release still asks for; since CUDA 12 the base name `cuGraphInstantiate` means
                // WithFlags (proc.rs); WithParams per thread for `--default-stream per-thread`.
                cuGraphInstantiate("cuGraphInstantiate" 10000)
                    fn(exec: *mut GraphExec, graph: Graph, error_node: *mut GraphNode,
                       log: *mut c_char, log_size: usize)
                    => graphs::instantiate(exec, graph);
                cuGraphInstantiate_v2("cuGraphInstantiate" 11000)
                    fn(exec: *mut GraphExec, graph: Graph, error_node: *mut GraphNode,
                       log: *mut c_char, log_size: usize)
                    => graphs::instantiate(exec, graph);
                cuGraphInstantiateWithFlags("cuGraphInstantiateWithFlags" 11040)
                    fn(exec: *mut GraphExec, graph: Graph, flags: u64)
                    => graphs::instantiate(exec, graph);
                cuGraphInstantiateWithParams("cuGraphInstantiateWithParams" 12000)
                    fn(exec: *mut GraphExec, graph: Graph, params: *mut c_void)
                    => graphs::instantiate(exec, graph);
                cuGraphInstantiateWithParams_ptsz("cuGraphInstantiateWithParams" 12000 ptsz)
                    fn(exec: *mut GraphExec, graph: Graph, params: *mut c_void)
                    => graphs::instantiate(exec, graph);
                cuGraphExecDestroy("cuGraphExecDestroy" 10000)
                    fn(exec: GraphExec)
                    => graphs::exec_destroy(exec);
                // Stream captures begun and ended, so that stream-ordered calls ask the driver
                // whether their stream is captured only while one may be (pools.rs); every form
                // a runtime asks for (tests/data/runtime-requests/).
                cuStreamBeginCapture("cuStreamBeginCapture" 10000)
                    fn(stream: Stream)
                    => pools::begin_capture();
                cuStreamBeginCapture_ptsz("cuStreamBeginCapture" 10000 ptsz)
                    fn(stream: Stream)
                    => pools::begin_capture();
                cuStreamBeginCapture_v2("cuStreamBeginCapture" 10010)
                    fn(stream: Stream, mode: c_int)
                    => pools::begin_capture();
                cuStreamBeginCapture_v2_ptsz("cuStreamBeginCapture" 10010 ptsz)
                    fn(stream: Stream, mode: c_int)
                    => pools::begin_capture();
                cuStreamBeginCaptureToGraph("cuStreamBeginCaptureToGraph" 12030)
                    fn(stream: Stream, graph: Graph, dependencies: *const GraphNode,
                       dependency_data: *const c_void, dependency_count: usize, mode: c_int)
                    => pools::begin_capture();
                cuStreamBeginCaptureToGraph_ptsz("cuStreamBeginCaptureToGraph" 12030 ptsz)
                    fn(stream: Stream, graph: Graph, dependencies: *const GraphNode,
                       dependency_data: *const c_void, dependency_count: usize, mode: c_int)
                    => pools::begin_capture();
                cuStreamEndCapture("cuStreamEndCapture" 10000)
                    fn(stream: Stream, graph: *mut Graph)
                    => pools::end_capture();
                cuStreamEndCapture_ptsz("cuStreamEndCapture" 10000 ptsz)
                    fn(stream: Stream, graph: *mut Graph)
                    => pools::end_capture();
            }
            runtime {
                cudaMalloc AllocDevice
                    fn(dev_ptr: *mut *mut c_void, size: usize) => allocation(size);
                cudaMallocManaged AllocManaged
                    fn(dev_ptr: *mut *mut c_void, size: usize, flags: c_uint) => allocation(size);
                cudaFree FreeDevice
                    fn(dev_ptr: *mut c_void) => free(dev_ptr);
                cudaMallocHost AllocHost
                    fn(ptr: *mut *mut c_void, size: usize) => allocation(size);
                cudaHostAlloc AllocHost
                    fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) => allocation(size);
                cudaFreeHost FreeHost
                    fn(ptr: *mut c_void) => free(ptr);
                cudaMallocPitch AllocPitch
                    fn(dev_ptr: *mut *mut c_void, pitch: *mut usize, width: usize, height: usize)
                    => allocation(width.saturating_mul(height));
                cudaMalloc3D AllocPitch
                    fn(pitched: *mut c_void, extent: Extent)
                    => allocation(extent.width.saturating_mul(extent.height).saturating_mul(extent.depth));
                cudaMallocAsync AllocAsync
                    fn(dev_ptr: *mut *mut c_void, size: usize, stream: Stream) => allocation(size);
                cudaMallocAsync_ptsz AllocAsync
                    fn(dev_ptr: *mut *mut c_void, size: usize, stream: Stream) => allocation(size);
                cudaFreeAsync FreeAsync
                    fn(dev_ptr: *mut c_void, stream: Stream) => free(dev_ptr);
                cudaFreeAsync_ptsz FreeAsync
                    fn(dev_ptr: *mut c_void, stream: Stream) => free(dev_ptr);
                cudaMallocFromPoolAsync AllocFromPool
                    fn(dev_ptr: *mut *mut c_void, size: usize, pool: *mut c_void, stream: Stream)
                    => allocation(size);
                cudaMallocFromPoolAsync_ptsz AllocFromPool
                    fn(dev_ptr: *mut *mut c_void, size: usize, pool: *mut c_void, stream: Stream)
                    => allocation(size);
                cudaMallocArray AllocArray
                    fn(array: *mut *mut c_void, desc: *const c_void, width: usize, height: usize, flags: c_uint)
                    => allocation(width.saturating_mul(height.max(1)));
                cudaFreeArray FreeArray
                    fn(array: *mut c_void) => free(array);
                // Registered host memory and IPC (issue 12).
                cudaHostRegister Register
                    fn(ptr: *mut c_void, size: usize, flags: c_uint) => allocation(size);
                cudaHostUnregister Unregister
                    fn(ptr: *mut c_void) => free(ptr);
                cudaIpcOpenMemHandle IpcOpen
                    fn(dev_ptr: *mut *mut c_void, handle: IpcMemHandle, flags: c_uint) => allocation(0);
                cudaIpcCloseMemHandle IpcClose
                    fn(dev_ptr: *mut c_void) => free(dev_ptr);
                cudaMemPoolImportPointer ImportPointer
                    fn(ptr: *mut *mut c_void, pool: *mut c_void, data: *mut c_void) => allocation(0);
            }
            libraries {
                cublas: cublasCreate_v2 create fn(handle: *mut Handle) => handle;
                cublas: cublasDestroy_v2 destroy fn(handle: Handle) => handle;
                cublasLt: cublasLtCreate create fn(handle: *mut Handle) => handle;
                cublasLt: cublasLtDestroy destroy fn(handle: Handle) => handle;
                cudnn: cudnnCreate create fn(handle: *mut Handle) => handle;
                cudnn: cudnnDestroy destroy fn(handle: Handle) => handle;
                cusparse: cusparseCreate create fn(handle: *mut Handle) => handle;
                cusparse: cusparseDestroy destroy fn(handle: Handle) => handle;
                cusolver: cusolverDnCreate create fn(handle: *mut Handle) => handle;
                cusolver: cusolverDnDestroy destroy fn(handle: Handle) => handle;
                cusolver: cusolverSpCreate create fn(handle: *mut Handle) => handle;
                cusolver: cusolverSpDestroy destroy fn(handle: Handle) => handle;
                // cuFFT plans are numbers. cufftPlan* make a plan and its work area; cufftCreate
                // makes an empty one that cufftMakePlan* then give a work area.
                cufft: cufftCreate create fn(plan: *mut c_int) => plan;
                cufft: cufftPlan1d create
                    fn(plan: *mut c_int, nx: c_int, kind: c_int, batch: c_int) => plan;
                cufft: cufftPlan2d create
                    fn(plan: *mut c_int, nx: c_int, ny: c_int, kind: c_int) => plan;
                cufft: cufftPlan3d create
                    fn(plan: *mut c_int, nx: c_int, ny: c_int, nz: c_int, kind: c_int) => plan;
                cufft: cufftPlanMany create
                    fn(plan: *mut c_int, rank: c_int, n: *mut c_int, inembed: *mut c_int,
                       istride: c_int, idist: c_int, onembed: *mut c_int, ostride: c_int,
                       odist: c_int, kind: c_int, batch: c_int) => plan;
                cufft: cufftMakePlan1d using
                    fn(plan: c_int, nx: c_int, kind: c_int, batch: c_int, work: *mut usize)
                    => plan;
                cufft: cufftMakePlan2d using
                    fn(plan: c_int, nx: c_int, ny: c_int, kind: c_int, work: *mut usize) => plan;
                cufft: cufftMakePlan3d using
                    fn(plan: c_int, nx: c_int, ny: c_int, nz: c_int, kind: c_int,
                       work: *mut usize) => plan;
                cufft: cufftMakePlanMany using
                    fn(plan: c_int, rank: c_int, n: *mut c_int, inembed: *mut c_int,
                       istride: c_int, idist: c_int, onembed: *mut c_int, ostride: c_int,
                       odist: c_int, kind: c_int, batch: c_int, work: *mut usize) => plan;
                cufft: cufftMakePlanMany64 using
                    fn(plan: c_int, rank: c_int, n: *mut i64, inembed: *mut i64, istride: i64,
                       idist: i64, onembed: *mut i64, ostride: i64, odist: i64, kind: c_int,
                       batch: i64, work: *mut usize) => plan;
                cufft: cufftXtMakePlanMany using
                    fn(plan: c_int, rank: c_int, n: *mut i64, inembed: *mut i64, istride: i64,
                       idist: i64, input_type: c_int, onembed: *mut i64, ostride: i64,
                       odist: i64, output_type: c_int, batch: i64, work: *mut usize,
                       execution_type: c_int) => plan;
                cufft: cufftDestroy destroy fn(plan: c_int) => plan;
                // cuRAND allocates a generator's state at its first generation.
                curand: curandCreateGenerator create fn(generator: *mut Handle, kind: c_int)
                    => generator;
                curand: curandCreateGeneratorHost create fn(generator: *mut Handle, kind: c_int)
                    => generator;
                curand: curandGenerate using
                    fn(generator: Handle, out: *mut c_uint, n: usize) => generator;
                curand: curandGenerateLongLong using
                    fn(generator: Handle, out: *mut u64, n: usize) => generator;
                curand: curandGenerateUniform using
                    fn(generator: Handle, out: *mut f32, n: usize) => generator;
                curand: curandGenerateUniformDouble using
                    fn(generator: Handle, out: *mut f64, n: usize) => generator;
                curand: curandGenerateNormal using
                    fn(generator: Handle, out: *mut f32, n: usize, mean: f32, stddev: f32)
                    => generator;
                curand: curandGenerateNormalDouble using
                    fn(generator: Handle, out: *mut f64, n: usize, mean: f64, stddev: f64)
                    => generator;
                curand: curandGenerateLogNormal using
                    fn(generator: Handle, out: *mut f32, n: usize, mean: f32, stddev: f32)
                    => generator;
                curand: curandGenerateLogNormalDouble using
                    fn(generator: Handle, out: *mut f64, n: usize, mean: f64, stddev: f64)
                    => generator;
                curand: curandGeneratePoisson using
                    fn(generator: Handle, out: *mut c_uint, n: usize, lambda: f64) => generator;
                curand: curandGenerateSeeds using fn(generator: Handle) => generator;
                curand: curandDestroyGenerator destroy fn(generator: Handle) => generator;
                nccl: ncclCommInitRank create
                    fn(comm: *mut Handle, nranks: c_int, id: NcclUniqueId, rank: c_int) => comm;
                nccl: ncclCommInitRankConfig create
                    fn(comm: *mut Handle, nranks: c_int, id: NcclUniqueId, rank: c_int,
                       config: *mut c_void) => comm;
                nccl: ncclCommSplit create
                    fn(parent: Handle, color: c_int, key: c_int, comm: *mut Handle,
                       config: *mut c_void) => comm;
                // A communicator sets up its connections and buffers at its first collectives.
                nccl: ncclAllReduce using
                    fn(send: *const c_void, recv: *mut c_void, count: usize, datatype: c_int,
                       op: c_int, comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclBroadcast using
                    fn(send: *const c_void, recv: *mut c_void, count: usize, datatype: c_int,
                       root: c_int, comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclReduce using
                    fn(send: *const c_void, recv: *mut c_void, count: usize, datatype: c_int,
                       op: c_int, root: c_int, comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclAllGather using
                    fn(send: *const c_void, recv: *mut c_void, count: usize, datatype: c_int,
                       comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclReduceScatter using
                    fn(send: *const c_void, recv: *mut c_void, count: usize, datatype: c_int,
                       op: c_int, comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclSend using
                    fn(send: *const c_void, count: usize, datatype: c_int, peer: c_int,
                       comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclRecv using
                    fn(recv: *mut c_void, count: usize, datatype: c_int, peer: c_int,
                       comm: Handle, stream: *mut c_void) => comm;
                nccl: ncclCommDestroy destroy fn(comm: Handle) => comm;
                nccl: ncclCommAbort destroy fn(comm: Handle) => comm;
            }
        }
    };
}

pub(crate) use hooked;
