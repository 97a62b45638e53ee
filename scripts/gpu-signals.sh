#!/usr/bin/env bash
# scripts/gpu-signals.sh — issue 21 on a real GPU: SIGTERM sent into a running CUDA program at a
# random moment, bare and under the shim (LD_PRELOAD, as `cudaleak run` starts it). For each
# program and mode: how long from `kill -TERM` to the process's end (median and max over the
# rounds), whether it died of SIGTERM, and under the shim whether a complete signal dump
# (end=signal, the 3000-byte block or the model's tensors live) was written.
#
#   scripts/gpu-signals.sh [ROUNDS]      (default 20; DIR with cudaleak and libcudaleak.so as
#                                         for gpu-validate.sh: CUDALEAK_BIN_DIR, else
#                                         target/release, else .device/bin)
# Prints a Markdown table; with $OUT set, also $OUT/gpu-signals.md. Exit status 0 only if every
# shim round died of SIGTERM with a complete dump.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
rounds="${1:-20}"
bin_dir="${CUDALEAK_BIN_DIR:-}"
for d in target/release .device/bin; do
    [[ -z "$bin_dir" && -f "$d/libcudaleak.so" ]] && bin_dir="$d"
done
shim="$(cd "$bin_dir" && pwd)/libcudaleak.so"
nvcc="$(scripts/nvcc.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$nvcc" -g -O2 -o "$work/signal_loop" tests/gpu/signals/signal_loop.cu

# one_round SHIM(0|1) DUMPDIR CMD... -> prints "ms dump_ok" and then the exit status
one_round() {
    local with_shim="$1" dir="$2"
    shift 2
    mkdir -p "$dir"
    local fifo="$dir/out"
    mkfifo "$fifo"
    if [[ "$with_shim" == 1 ]]; then
        CUDALEAK_OUTPUT="$dir/" LD_PRELOAD="$shim" "$@" >"$fifo" 2>"$dir/err" &
    else
        "$@" >"$fifo" 2>"$dir/err" &
    fi
    local pid=$!
    local line=""
    read -r line <"$fifo" || true
    if [[ "$line" != ready ]]; then
        echo "gpu-signals: $* printed '$line' instead of ready: $(cat "$dir/err")" >&2
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        echo "0 0"
        echo 1
        return
    fi
    sleep "0.$((RANDOM % 5))$((RANDOM % 10))"
    python3 - "$pid" "$dir" "$with_shim" <<'PY'
import glob, json, os, signal, sys, time
pid, d, with_shim = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
t0 = time.monotonic()
os.kill(pid, signal.SIGTERM)
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    # A zombie of ours still answers kill(0): ask /proc for its state.
    try:
        if open(f"/proc/{pid}/stat").read().split(") ")[1][0] in "ZX":
            break
    except FileNotFoundError:
        break
    if time.monotonic() - t0 > 30:
        os.kill(pid, signal.SIGKILL)
        break
    time.sleep(0.0005)
ms = (time.monotonic() - t0) * 1000
ok = 1
if with_shim:
    dumps = glob.glob(f"{d}/cudaleak.{pid}.json")
    ok = 0
    if dumps:
        dump = json.load(open(dumps[0]))
        ok = int(dump["process"]["end"] == "signal" and dump["summary"]["live_allocations"] >= 1)
print(f"{ms:.1f} {ok}")
PY
    local status=0
    wait "$pid" || status=$?
    echo "$status"
}

table="| program | run | rounds | died of SIGTERM | complete dump | ms to death: median | max |
|---|---|---:|---:|---:|---:|---:|"
fail=0
run_case() {
    local name="$1"
    shift
    for with_shim in 0 1; do
        local times=() died=0 dumped=0
        for r in $(seq 1 "$rounds"); do
            local res
            res="$(one_round "$with_shim" "$work/$name.$with_shim.$r" "$@" | tr '\n' ' ')"
            read -r ms ok status <<<"$res"
            times+=("$ms")
            [[ "$status" == 143 ]] && died=$((died + 1))
            dumped=$((dumped + ok))
        done
        local stats
        stats="$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f | %.1f", a[int((NR+1)/2)], a[NR]}')"
        local run=bare dumpcol="—"
        if [[ "$with_shim" == 1 ]]; then
            run="shim"
            dumpcol="$dumped/$rounds"
            [[ "$dumped" == "$rounds" && "$died" == "$rounds" ]] || fail=1
        fi
        table+="
| $name | $run | $rounds | $died/$rounds | $dumpcol | $stats |"
    done
}
run_case "cudaMalloc/cudaFree loop" "$work/signal_loop" alloc
MALLOC_ARENA_MAX=1 run_case "malloc loop (MALLOC_ARENA_MAX=1)" env MALLOC_ARENA_MAX=1 "$work/signal_loop" malloc
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    run_case "PyTorch training loop, caching off" env PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 tests/gpu/signals/torch_loop.py
    run_case "PyTorch training loop" python3 tests/gpu/signals/torch_loop.py
fi
header="gpu-signals, $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
printf '%s\n\n%s\n' "$header" "$table"
[[ -n "${OUT:-}" ]] && printf '%s\n\n%s\n' "$header" "$table" >"$OUT/gpu-signals.md"
exit "$fail"
