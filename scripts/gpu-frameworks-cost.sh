#!/usr/bin/env bash
# scripts/gpu-frameworks-cost.sh — what the frameworks bootstrap of `cudaleak run` (issue 40:
# python/cudaleak/_bootstrap.py on PYTHONPATH, reading PyTorch's own counts every 50 ms) costs a
# Python program, in one run (run it through the device tool):
#   1. start-up: `python3 -c pass` and `python3 -c 'import torch; torch.ones(1, device="cuda")'`
#      under `cudaleak run`, with the bootstrap and without (CUDALEAK_FRAMEWORKS=0), alternating;
#   2. steady state: tests/bench/gpu/mlp.py (its own timed loop) under `cudaleak run`, with and
#      without the bootstrap, alternating, a GPU-bound width (4096) and a CPU-bound one (256:
#      Python and dispatch, where a reader thread taking the GIL would show first);
#   3. PyTorch's own allocation record, which the bootstrap turns on after growth was seen, and
#      reading it at the end (tests/bench/gpu/record_cost.py, no shim).
#
#   CUDALEAK_BIN_DIR=DIR [REPS=5] scripts/gpu-frameworks-cost.sh
#
# DIR holds cudaleak and libcudaleak.so. Prints medians and ratios as Markdown; asserts nothing.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$(cd "${CUDALEAK_BIN_DIR:-$repo/target/release}" && pwd)"
cudaleak="$bin_dir/cudaleak"
reps="${REPS:-5}"
work="$(mktemp -d)"
mlp="$repo/tests/bench/gpu/mlp.py"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }
spread() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR > 0) printf "%s–%s", a[1], a[NR]}'; }
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x + 0 > 0 && y + 0 > 0) printf "%.3fx", y / x; else print "-" }'; }
# under MODE CMD…: runs CMD under `cudaleak run` (MODE with: the bootstrap; without: not)
under() {
    local mode="$1"; shift
    if [[ "$mode" == with ]]; then
        "$cudaleak" run --out "$work/out" --exit-code 0 -- "$@"
    else
        CUDALEAK_FRAMEWORKS=0 "$cudaleak" run --out "$work/out" --exit-code 0 -- "$@"
    fi
}
# wall MODE CMD…: seconds the whole command took
wall() {
    local t0 t1
    t0=$(date +%s%N)
    under "$@" > /dev/null 2>&1
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'
}

echo "# cudaleak frameworks bootstrap cost — $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
echo "- $(python3 -c 'import sys, torch; print("Python", sys.version.split()[0], "PyTorch", torch.__version__)')"
echo "- cudaleak: $("$cudaleak" --version)"
echo "- medians of $reps runs, alternating with and without the bootstrap"
echo
echo "| what | without (min–max) | with (min–max) | ratio |"
echo "|---|---:|---:|---:|"
row() {  # row NAME WITHOUT_VALUES WITH_VALUES
    local a b
    a="$(median <<<"$2")"; b="$(median <<<"$3")"
    echo "| $1 | $a ($(spread <<<"$2")) | $b ($(spread <<<"$3")) | $(ratio "$a" "$b") |"
}

declare -A v
for name in pass torch_init; do
    v[$name.with]="" v[$name.without]=""
    for ((r = 0; r < reps; r++)); do
        for mode in without with; do
            case $name in
                pass) s=$(wall "$mode" python3 -c pass) ;;
                torch_init) s=$(wall "$mode" python3 -c 'import torch; torch.ones(1, device="cuda")') ;;
            esac
            v[$name.$mode]+=" $s"
        done
    done
    row "\`cudaleak run -- python3 -c ${name/torch_init/'import torch; torch.ones(1, device=\"cuda\")'}\` (s, whole run)" "${v[$name.without]}" "${v[$name.with]}"
done

for spec in "mlp_4096|300 4096" "mlp_256|2000 256"; do
    IFS='|' read -r name args <<<"$spec"
    v[$name.with]="" v[$name.without]=""
    for ((r = 0; r < reps; r++)); do
        for mode in without with; do
            # shellcheck disable=SC2086
            s="$(under "$mode" python3 "$mlp" $args 2> /dev/null | sed -n 's/^loop_s //p' | tail -1)"
            v[$name.$mode]+=" $s"
        done
    done
    row "mlp.py $args: its timed loop (s)" "${v[$name.without]}" "${v[$name.with]}"
done

echo
echo "PyTorch's allocation record (tests/bench/gpu/record_cost.py, no shim: rounds alternating the record off and on in one process; then \`_snapshot()\` with 5000 kept tensors):"
echo
echo '```'
for spec in "200 256" "50 4096"; do
    # shellcheck disable=SC2086
    echo "steps width: $spec"; python3 "$repo/tests/bench/gpu/record_cost.py" $spec 20 5000 2>&1 | tail -6
done
echo '```'
