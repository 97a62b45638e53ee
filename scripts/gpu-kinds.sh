#!/usr/bin/env bash
# scripts/gpu-kinds.sh — every kind of CUDA memory beyond cudaMalloc on a real GPU: each program
# in tests/gpu/kinds/*.cu is built with nvcc (static cudart, the default, and -cudart shared),
# run with `leak` and `clean`, bare, under `cudaleak run` and under compute-sanitizer
# --leak-check full, and the three verdicts printed side by side. Run through the device tool:
#
#   CUDALEAK_BIN_DIR=DIR scripts/gpu-kinds.sh
#
# With $OUT set, writes $OUT/kinds.log (every report) too.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-$repo/target/release}"
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
sanitizer="$(dirname "$nvcc")/compute-sanitizer"
work="$(mktemp -d)"
log="${OUT:-$work}/kinds.log"
exec > >(tee "$log") 2>&1
echo "date: $(date -u +%FT%TZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $("$nvcc" --version | tail -1)"
for src in "$repo"/tests/gpu/kinds/*.cu; do
    name="$(basename "$src" .cu)"
    for flavour in static shared; do
        "$nvcc" -g -lineinfo -arch=sm_90 -cudart "$flavour" -o "$work/$name-$flavour" "$src" -lcuda || exit 2
        for mode in leak clean; do
            "$work/$name-$flavour" "$mode" > /dev/null; bare=$?
            echo "== $name $flavour $mode: cudaleak"
            "$bin_dir/cudaleak" run --out "$work/out/$name-$flavour-$mode" -- "$work/$name-$flavour" "$mode"
            under=$?
            # Every process of the run (ipc forks a child): live blocks, bytes and kinds summed.
            seen="$(python3 - "$work/out/$name-$flavour-$mode"/run-*/cudaleak.*.json <<'PY'
import json, sys
n = b = 0
kinds = set()
for path in sys.argv[1:]:
    d = json.load(open(path))
    n += len(d["live"])
    b += sum(r["size"] for r in d["live"])
    kinds |= {r["kind"] for r in d["live"]}
print("live=%d/%dB kinds=%s" % (n, b, ",".join(sorted(kinds)) or "-"))
PY
)"
            echo "== $name $flavour $mode: compute-sanitizer"
            "$sanitizer" --leak-check full "$work/$name-$flavour" "$mode" > "$work/cs.txt" 2>&1
            cat "$work/cs.txt"
            cs="$(grep -E 'LEAK SUMMARY|Leaked [0-9]+ bytes' "$work/cs.txt" | tail -1)"
            echo "RESULT $name $flavour $mode bare=$bare cudaleak=$under $seen | compute-sanitizer: ${cs:-no leak reported}"
        done
    done
done
