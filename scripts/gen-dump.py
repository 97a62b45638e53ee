#!/usr/bin/env python3
"""Writes a large, valid cudaleak dump (schema v1) for measuring the CLI: N live blocks from N
distinct stacks, streamed to a file (or stdout) without holding the dump in memory.

Stacks look like a real C++/CUDA program's: two runtime frames innermost (hidden by the
report), DEPTH user frames with demangled C++ names of 40-110 characters in a few dozen source
files and modules, then `main` and the C start-up frames (also hidden). Names repeat across
stacks as they do in a program (a pool of FUNCTIONS functions), but no two blocks share a stack.

  scripts/gen-dump.py N [--depth 8] [--functions 3000] [--distinct-frames] [--pid 7001]
                        [--snapshot K] [-o FILE]

With --distinct-frames no two stacks share a frame: each stack is DEPTH frames of functions of
its own (a program with that many distinct call paths, none through a common frame), so names
repeat only in files and modules, and interning frames saves nothing.

With --snapshot K the dump is snapshot K of a running process (same pid and start time as the
final dump), so `gen-dump.py 50000 --snapshot 1` and `gen-dump.py 100000` make a series for
`report --growth`: the first 50 000 blocks are the same in both.
"""
import argparse
import json
import sys

CUDART = "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
EXE = "/home/ci/builds/acme/simulation/build/release/bin/fluid_solver"
LIBS = [EXE] + [
    "/home/ci/builds/acme/simulation/build/release/lib/lib%s.so.2" % n
    for n in ("solver_core", "mesh_io", "linear_algebra", "particles", "boundary", "telemetry")
]
NAMESPACES = ["acme::sim", "acme::mesh", "acme::la::detail", "acme::particles", "acme::io",
              "thrust::cuda_cub::detail", "acme::sim::kernels", "acme::util"]
CLASSES = ["FluidSolver", "PressureProjector", "SparseMatrix<float, int>", "ParticleSystem",
           "DeviceBuffer<float4>", "BoundaryHandler", "MeshPartition", "StreamPool",
           "ScratchAllocator", "TimeIntegrator<3>"]
VERBS = ["allocate_workspace", "step", "apply", "resize", "build_halo", "advect", "project",
         "solve_cg", "upload", "gather_neighbours", "compute_forces", "refine_level",
         "flush_metrics", "assemble", "prepare_launch"]
ARGS = ["(unsigned long)", "(float const*, unsigned long, CUstream_st*)", "(int, double)",
        "(acme::sim::State&, acme::sim::Params const&)", "()", "(std::vector<int, std::allocator<int> > const&)",
        "(float4*, int)", "(cudaStream_t)"]


def function_pool(n):
    pool = []
    for i in range(n):
        name = "%s::%s::%s_%d%s" % (
            NAMESPACES[i % len(NAMESPACES)], CLASSES[(i // 7) % len(CLASSES)],
            VERBS[(i // 3) % len(VERBS)], i, ARGS[(i // 11) % len(ARGS)])
        module = LIBS[i % len(LIBS)]
        file = "/home/ci/builds/acme/simulation/src/%s/%s_%d.cu" % (
            module.rsplit("/", 1)[1].split(".")[0].removeprefix("lib"), VERBS[i % len(VERBS)], i % 97)
        pool.append((name, file, module, 0x10000 + 0x140 * i))
    return pool


def frame(ip, module, offset, function, file, line):
    return {"ip": "0x%x" % ip, "module": module, "offset": "0x%x" % offset,
            "function": function, "file": file, "line": line}


def base_of(module):
    return 0x55d4c2a00000 if module == EXE else 0x7f3a00000000 + 0x1000000 * LIBS.index(module)


def stack(i, depth, pool):
    p = len(pool)
    frames = [
        frame(0x7f3a11005a10, CUDART, 0x5a10, "cudart::driverHelper::mallocPtr(unsigned long, void**)", None, None),
        frame(0x7f3a11006b20, CUDART, 0x6b20, "cudaMalloc", None, None),
    ]
    # Frame 0 and 1 spell i in base p: every stack differs; the rest vary with i too.
    for k in range(depth):
        if k == 0:
            j = i % p
        elif k == 1:
            j = (i // p + 17) % p
        else:
            j = (i * (2 * k + 1) + 31 * k) % p
        name, file, module, off = pool[j]
        line = 20 + (i * (k + 3)) % 900
        offset = off + (line % 40) * 4
        frames.append(frame(base_of(module) + offset, module, offset, name, file, line))
    frames.append(frame(0x55d4c2a01b10, EXE, 0x1b10, "main",
                        "/home/ci/builds/acme/simulation/src/app/main.cpp", 212))
    frames.append(frame(0x7f3a11229d90, LIBC, 0x29d90, None, None, None))
    frames.append(frame(0x7f3a11229e40, LIBC, 0x29e40, "__libc_start_main", None, None))
    frames.append(frame(0x55d4c2a01105, EXE, 0x1105, "_start", None, None))
    return {"frames": frames}


def distinct_stack(i, depth):
    """Stack i of --distinct-frames: DEPTH frames that no other stack has (names of a program
    built in /src, shorter than the pool's)."""
    frames = []
    for k in range(depth):
        j = i * depth + k
        lib = LIBS[j % len(LIBS)].rsplit("/", 1)[1].split(".")[0].removeprefix("lib")
        module = "/opt/lib/lib%s.so" % lib
        name = "%s::%s_%d" % (lib, VERBS[(j // 3) % len(VERBS)], j)
        file = "/src/%s.cu" % VERBS[j % len(VERBS)]
        line = 20 + (j * 7) % 900
        offset = 0x10000 + 0x40 * j
        frames.append(frame(0x7f3a00000000 + 0x1000000 * (j % len(LIBS)) + offset, module,
                            offset, name, file, line))
    return {"frames": frames}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="live blocks (and distinct stacks)")
    ap.add_argument("--depth", type=int, default=8, help="user frames per stack (default 8)")
    ap.add_argument("--functions", type=int, default=3000, help="distinct functions (default 3000)")
    ap.add_argument("--distinct-frames", action="store_true",
                    help="no two stacks share a frame: DEPTH frames of functions of their own")
    ap.add_argument("--pid", type=int, default=7001)
    ap.add_argument("--snapshot", type=int, help="write snapshot K instead of the exit dump")
    ap.add_argument("-o", "--output", help="file to write (default: standard output)")
    a = ap.parse_args()
    pool = function_pool(max(a.functions, 2))
    out = open(a.output, "w") if a.output else sys.stdout
    w = out.write
    sizes = [4096 * (1 + (i * 37) % 256) for i in range(a.n)]
    live_bytes = sum(sizes)
    proc = {"pid": a.pid, "ppid": 1, "exe": EXE, "argv": [EXE, "--steps", "5000"], "rank": None,
            "start_unix_ms": 1764682800000,
            "end_unix_ms": 1764682800000 + (60000 * a.snapshot if a.snapshot else 3600000),
            "end": "snapshot" if a.snapshot else "exit"}
    if a.snapshot:
        proc["snapshot"] = a.snapshot
    summary = {"allocations": a.n, "frees": 0, "untracked_frees": 0, "failed_allocations": 0,
               "invalid_frees": 0, "live_allocations": a.n, "live_bytes": live_bytes,
               "peak_live_bytes": live_bytes, "bytes_allocated": live_bytes}
    w('{"cudaleak_dump":1,"process":%s,"summary":%s,"stacks":[' % (
        json.dumps(proc, separators=(",", ":")), json.dumps(summary, separators=(",", ":"))))
    for i in range(a.n):
        if i:
            w(",")
        s = distinct_stack(i, a.depth) if a.distinct_frames else stack(i, a.depth, pool)
        w(json.dumps(s, separators=(",", ":")))
    w('],"live":[')
    for i in range(a.n):
        if i:
            w(",")
        w('{"address":"0x%x","size":%d,"api":"cudaMalloc","kind":"device","device":0,'
          '"thread":%d,"seq":%d,"time_ms":%d,"stack":%d}' % (
              0x7f0000000000 + 0x100000 * i, sizes[i], a.pid + i % 8, 2 * i + 1, i // 10, i))
    w('],"events":[]}\n')
    if a.output:
        out.close()


if __name__ == "__main__":
    main()
