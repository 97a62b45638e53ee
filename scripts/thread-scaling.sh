#!/usr/bin/env bash
# scripts/thread-scaling.sh — does recording scale with threads? The alloc+free pair benchmark
# (tests/scenarios/bench_pairs.c) on the null benchmark driver (tests/bench/benchdrv.c) at 1 to
# 64 threads, bare and under the shim (issue 43):
#
#   scripts/thread-scaling.sh DIR [REPS]
#
# DIR holds a built libcudaleak.so (e.g. target/release, or .device/bin carried to a GPU
# machine). Needs cc and python3, no Rust: the driver and the program are compiled here from
# tests/. Every thread count does the same total work, PAIRS pairs split evenly between its
# threads (a pair: cuMemAlloc_v2 of 4 KiB, cuMemFree_v2, 22 frames deep); throughput is all pairs
# over the wall time of the parallel part (first thread's start to last thread's end). Two
# drivers: the null one (a call costs nanoseconds: the shim's own cost, with nothing to hide it)
# and, unless SPIN_NS=0, one whose every call computes for SPIN_NS ns first (BENCHDRV_SPIN_NS,
# default 1500), as a real driver's call takes 1-2 us of a core: threads then spend most of their
# time in the driver, and the question is whether the shim's shared parts (the sequence, the
# ring's slots, the one fold at a time) become what they queue on. That variant runs SPIN_PAIRS
# pairs (default 128 000). Each repetition (REPS, default 5) runs every thread count bare and
# under the shim, in turn (which goes first alternates), so load from other work hits all alike.
#
# Every shim run's dump is checked: one last pair of 1 GiB after the threads end makes its peak
# exactly 1 GiB, its live bytes 0 and its allocations all of them plus one, unless a record was
# lost or counted twice (the "exact" column counts the runs where all three held).
#
# Prints a Markdown table per driver: medians of REPS. THREADS="1 2 4" runs only those counts.
# Writes the tables and the raw lines under $OUT when OUT is set, with what each run printed on
# stderr (thread-scaling.stderr.txt: a probe build's parts, scripts/build-probe.sh). Asserts nothing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: thread-scaling.sh DIR [REPS]"
[[ $# -ge 1 && $# -le 2 ]] || { echo "$usage" >&2; exit 2; }
so="$(cd "$1" 2>/dev/null && pwd)/libcudaleak.so"
[[ -f "$so" ]] || { echo "thread-scaling: no $1/libcudaleak.so" >&2; exit 2; }
reps="${2:-5}"
threads="${THREADS:-1 2 4 8 16 32 64}"
pairs="${PAIRS:-1280000}"
spin_ns="${SPIN_NS:-1500}"
spin_pairs="${SPIN_PAIRS:-128000}"
depth=17 # 22 frames below the hook, as `make bench`'s pairs
cc="${CC:-cc}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${OUT:-$work}"
mkdir -p "$out"
"$cc" -O2 -fPIC -shared -fvisibility=hidden -Wl,-soname,libcuda.so.1 \
    -o "$work/libcuda.so.1" "$repo/tests/bench/benchdrv.c"
"$cc" -g -O1 -fno-omit-frame-pointer -o "$work/bench_pairs" \
    "$repo/tests/scenarios/bench_pairs.c" -ldl -lpthread

# One run: prints "KEY VALUE" words on one line. Under the shim, checks the dump as well.
run_one() { # DRIVER_ENV THREADS PAIRS_EACH shim|bare
    local drv_env="$1" n="$2" each="$3" how="$4" dumps="$work/dumps" line
    rm -rf "$dumps" && mkdir -p "$dumps"
    local -a pre=()
    [[ $how == shim ]] && pre=(LD_PRELOAD="$so" CUDALEAK_OUTPUT="$dumps/" CUDALEAK_QUIET=1)
    # timeout outside env: only the program runs under the shim (and writes a dump).
    line="$(timeout 600 env LD_LIBRARY_PATH="$work" ${drv_env:+"$drv_env"} "${pre[@]}" \
        "$work/bench_pairs" "$n" "$each" "$depth" spike 2>"$work/stderr" | tr '\n' ' ')"
    # What the program said on stderr (a probe build's parts: scripts/build-probe.sh), by run.
    sed "s|^|threads=$n $how ${drv_env:-null}: |" "$work/stderr" >>"$out/thread-scaling.stderr.txt"
    if [[ $how == shim ]]; then
        line+="exact $(python3 - "$dumps" "$line" <<'EOF'
import glob, json, sys
words = sys.argv[2].split()
want = dict(zip(words[::2], words[1::2]))
dumps = glob.glob(sys.argv[1] + "/*.json")
if len(dumps) != 1:
    print(0)
    sys.exit()
s = json.load(open(dumps[0]))["summary"]
ok = (s["peak_live_bytes"] == int(want["peak_bytes"]) and s["live_bytes"] == 0
      and s["allocations"] == s["frees"] == int(want["allocations"]))
print(int(ok))
EOF
)"
    fi
    echo "$line"
}

raw="$out/thread-scaling.raw.txt"
: >"$raw"
variants=(null)
[[ $spin_ns != 0 ]] && variants+=(spin)
for variant in "${variants[@]}"; do
    if [[ $variant == spin ]]; then
        drv_env="BENCHDRV_SPIN_NS=$spin_ns" total="$spin_pairs"
    else
        drv_env="" total="$pairs"
    fi
    for ((i = 1; i <= reps; i++)); do
        for n in $threads; do
            each=$((total / n))
            order=(bare shim)
            ((i % 2 == 0)) && order=(shim bare)
            for how in "${order[@]}"; do
                echo "$variant $how threads $n rep $i $(run_one "$drv_env" "$n" "$each" "$how")" \
                    | tee -a "$raw" >&2
            done
        done
    done
done

table="$out/thread-scaling.md"
python3 - "$raw" "$spin_ns" "$pairs" "$spin_pairs" "$reps" <<'EOF' | tee "$table"
import os, statistics, sys
raw, spin_ns, pairs, spin_pairs, reps = sys.argv[1:]
runs = {}
for line in open(raw):
    w = line.split()
    variant, how, kv = w[0], w[1], dict(zip(w[2::2], w[3::2]))
    runs.setdefault((variant, how, int(kv["threads"])), []).append(kv)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"{cpu}, {os.cpu_count()} cores; medians of {reps} runs; same total work at every thread count")
for variant, title in (("null", f"null driver, {pairs} pairs"),
                       ("spin", f"driver computing {spin_ns} ns a call (BENCHDRV_SPIN_NS), {spin_pairs} pairs")):
    counts = sorted({n for (v, _, n) in runs if v == variant})
    if not counts:
        continue
    med = lambda how, n, k: statistics.median(float(r[k]) for r in runs[(variant, how, n)])
    print()
    print(f"### {title}")
    print()
    print("| threads | bare ns/pair (wall) | shim ns/pair (wall) | shim CPU ns/pair (all threads) "
          "| shim throughput / 1 thread's | bare throughput / 1 thread's | added ns/pair (wall) | peak exact |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    b1, s1 = med("bare", counts[0], "ns_per_pair"), med("shim", counts[0], "ns_per_pair")
    for n in counts:
        b, s = med("bare", n, "ns_per_pair"), med("shim", n, "ns_per_pair")
        c = med("shim", n, "cpu_ns_per_pair")
        shim_runs = runs[(variant, "shim", n)]
        exact = sum(int(r.get("exact", 0)) for r in shim_runs)
        print(f"| {n} | {b:.1f} | {s:.1f} | {c:.1f} | {s1 / s:.2f}x | {b1 / b:.2f}x | {s - b:.1f} "
              f"| {exact}/{len(shim_runs)} |")
EOF
