#!/usr/bin/env python3
"""What naming a dump's frames costs the CLI for large shared libraries without debug
information (as PyTorch's and NVIDIA's are): writes an unnamed dump (the shim's form) with one
live block whose stack has FRAMES frames in each library given, each inside one of its exported
functions (from `readelf --dyn-syms`), then times `cudaleak report --format json` on it for each
CLI given (REPS runs, alternating; with --instructions, callgrind's count of one run instead) and
checks that `cudaleak symbolize` names the dump the same with each.

usage: scripts/bench-naming.py [--frames N] [--reps N] [--instructions] --lib SO [--lib SO ...] CLI [CLI ...]
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    found = re.search(r"Build ID: ([0-9a-f]+)", out)
    return found.group(1) if found else None


def functions(path):
    out = subprocess.run(["readelf", "-W", "--dyn-syms", path], capture_output=True, text=True).stdout
    return [int(line.split()[1], 16) for line in out.splitlines() if " FUNC " in line and " UND " not in line]


def dump(libs, frames, seed=1):
    rng = random.Random(seed)
    modules, stack = [], []
    for i, path in enumerate(libs):
        base = 0x7F0000000000 + (i << 32)
        modules.append({"path": path, "base": hex(base), "build_id": build_id(path)})
        for address in rng.sample(functions(path), frames):
            offset = address + rng.randint(1, 40)
            stack.append({"ip": hex(base + offset), "module": path, "offset": hex(offset),
                          "function": None, "file": None, "line": None})
    return {
        "cudaleak_dump": 4,
        "process": {"pid": 7001, "ppid": 1, "exe": "/bin/bench", "argv": ["/bin/bench"], "rank": None,
                    "start_unix_ms": 0, "end_unix_ms": 1, "end": "exit"},
        "summary": {"allocations": 1, "frees": 0, "untracked_frees": 0, "failed_allocations": 0,
                    "invalid_frees": 0, "live_allocations": 1, "live_bytes": 4096,
                    "peak_live_bytes": 4096, "bytes_allocated": 4096},
        "unnamed": True,
        "modules": modules,
        "stacks": [{"frames": stack}],
        "live": [{"address": "0x7e0000000000", "size": 4096, "api": "cuMemAlloc_v2", "kind": "device",
                  "device": 0, "thread": 7001, "seq": 1, "time_ms": 0, "stack": 0}],
        "events": [],
        "floors": [{"stack": 0, "allocations": 0, "bytes": 0}],
        "shim": {"version": "0.1.0", "stack_walks": 1, "stack_reuses": 0},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", action="append", required=True, help="a shared library (repeatable)")
    ap.add_argument("--frames", type=int, default=40, help="frames in each library (default 40)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="callgrind's count, one run each")
    ap.add_argument("cli", nargs="+", help="cudaleak binaries to compare")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "unnamed.json")
        with open(path, "w") as f:
            json.dump(dump(a.lib, a.frames), f)
        named = []
        for i, cli in enumerate(a.cli):
            out = os.path.join(d, f"named{i}.json")
            subprocess.run([cli, "symbolize", "-o", out, path], check=True, capture_output=True)
            with open(out, "rb") as f:
                named.append(f.read())
        same = all(n == named[0] for n in named)
        print(f"{len(a.lib)} libraries, {a.frames} frames each; symbolize names the dump "
              f"{'the same' if same else 'DIFFERENTLY'} with every CLI")
        print("\n| CLI | " + ("instructions" if a.instructions else "seconds (each run)") + " |\n|---|---|")
        report = ["report", "--format", "json", path]
        if a.instructions:
            for cli in a.cli:
                cg = os.path.join(d, "cg.out")
                subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", cli, *report],
                               capture_output=True)
                total = subprocess.run(["callgrind_annotate", cg], capture_output=True, text=True).stdout
                print(f"| {cli} | {re.search(r'([0-9,]+) .*PROGRAM TOTALS', total).group(1)} |")
            return 0 if same else 1
        times = {cli: [] for cli in a.cli}
        for _ in range(a.reps):
            for cli in a.cli:
                t0 = time.perf_counter()
                subprocess.run([cli, *report], capture_output=True)
                times[cli].append(time.perf_counter() - t0)
        for cli, ts in times.items():
            print(f"| {cli} | median {statistics.median(ts):.3f} ({', '.join(f'{t:.3f}' for t in ts)}) |")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
