#!/usr/bin/env bash
# scripts/gpu-validate.sh — `make gpu-test`: every sample on a real NVIDIA GPU, both flavours.
#
#   scripts/gpu-validate.sh [--bin-dir DIR] [--samples DIR]      (or CUDALEAK_BIN_DIR=DIR)
#
# --samples DIR runs samples built elsewhere (DIR/static/, DIR/shared/, DIR/nvcc-version: what
# scripts/gpu-matrix.sh builds with each CUDA release) instead of building them here, and skips
# the Python rows; the shared flavour finds its libcudart through LD_LIBRARY_PATH (DIR/lib is put
# first when it exists).
#
# DIR holds prebuilt `cudaleak` and `libcudaleak.so` (default: target/release, else .device/bin),
# since the GPU machine has no Rust toolchain. nvcc comes from scripts/nvcc.sh (PATH, $CUDA_HOME,
# /usr/local/cuda). It builds cuda-samples/ with that nvcc, static and -cudart shared, into a
# fresh temporary directory (never build/samples/, whose binaries may come from another machine),
# runs each under `cudaleak run`, checks the dump against the sample's EXPECT lines with
# scripts/check_expect.py (the checker the null-device tests use), then does the same for
# cuda-samples/python/*.py (PyTorch with its cache off, CuPy with its pool off) when those
# packages import. Prints a table (sample, flavour, expected, seen, exit status without and with
# cudaleak, result) with the date, GPU, driver and nvcc version; with $OUT set, also writes
# $OUT/validation.md (the table, for docs/validation.md), $OUT/gpu-validate.log (every run's
# output and check) and $OUT/dumps.tar.gz. Exit status 0 only if every row passes.
#
# A row passes when the program exits 0 on its own, `cudaleak run` exits 0 or 23 (clean / leaks
# found) and the checker accepts the dump.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bin_dir="${CUDALEAK_BIN_DIR:-}"
prebuilt=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bin-dir) bin_dir="$2"; shift 2 ;;
        --samples) prebuilt="$(cd "$2" && pwd)"; shift 2 ;;
        *) echo "gpu-validate: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [[ -z "$bin_dir" ]]; then
    for d in target/release .device/bin; do
        if [[ -x "$d/cudaleak" && -f "$d/libcudaleak.so" ]]; then bin_dir="$d"; break; fi
    done
fi
bin_dir="$(cd "${bin_dir:-.}" && pwd)"
cudaleak="$bin_dir/cudaleak"
for f in "$cudaleak" "$bin_dir/libcudaleak.so"; do
    if [[ ! -e "$f" ]]; then
        echo "gpu-validate: $f is missing (pass --bin-dir DIR or CUDALEAK_BIN_DIR)" >&2
        exit 2
    fi
done
export CUDALEAK_SHIM="$bin_dir/libcudaleak.so"

export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [[ -n "$prebuilt" ]]; then
    nvcc_line="prebuilt in $prebuilt: $(head -n 1 "$prebuilt/nvcc-version" 2>/dev/null || echo unknown)"
    if [[ -d "$prebuilt/lib" ]]; then export LD_LIBRARY_PATH="$prebuilt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
else
    nvcc="$(bash scripts/nvcc.sh)"
    nvcc_line="$nvcc, $("$nvcc" --version | grep -i release)"
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-gpu.XXXXXX")"
log="$work/gpu-validate.log"
: >"$log"

say() { printf '%s\n' "$*" | tee -a "$log"; }

say "# cudaleak GPU validation, $(date -u '+%Y-%m-%d %H:%M UTC')"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)"
say "- GPU: ${gpu:-none visible to nvidia-smi} (name, driver)"
say "- nvidia-smi: $(nvidia-smi 2>/dev/null | grep -o 'Driver Version: [0-9.]*.*CUDA Version: [0-9.]*' | tr -s ' ' || echo unknown)"
say "- nvcc: $nvcc_line"
say "- cudaleak: $("$cudaleak" --version 2>&1 | head -n 1) from $bin_dir"
say "- host: $(uname -srm), $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"

if [[ -z "$gpu" ]]; then
    echo "gpu-validate: warning: no GPU visible; the static-cudart rows need a real driver and will fail" >&2
fi

build_ok=1
if [[ -n "$prebuilt" ]]; then
    ln -s "$prebuilt" "$work/samples"
else
    # Both flavours at once: they write to different directories.
    NVCC="$nvcc" bash scripts/build-samples.sh -o "$work/samples" static >>"$log" 2>&1 &
    static_build=$!
    NVCC="$nvcc" bash scripts/build-samples.sh -o "$work/samples" shared >>"$log" 2>&1 &
    shared_build=$!
    wait $static_build || build_ok=0
    wait $shared_build || build_ok=0
fi
if [[ $build_ok -eq 0 ]]; then
    echo "gpu-validate: building the samples failed; see $log" >&2
    tail -n 30 "$log" >&2
fi

rows=()
failures=0

# check NAME FLAVOUR SOURCE -- COMMAND...
check() {
    local name="$1" flavour="$2" source="$3"
    shift 4
    local runs="$work/runs/$flavour/$name" rc=0 bare=0 summary verdict expected seen
    mkdir -p "$runs"
    # Bare first: a sample that fails without the shim is the sample's fault, not the shim's.
    echo -e "\n=== $name ($flavour), bare: $*" >>"$log"
    "$@" >>"$log" 2>&1 || bare=$?
    echo "=== $name ($flavour): $cudaleak run --out $runs -- $*" >>"$log"
    "$cudaleak" run --out "$runs" -- "$@" >>"$log" 2>&1 || rc=$?
    # The shim writes addresses and modules; the checker reads names.
    "$cudaleak" symbolize "$runs" >>"$log" 2>&1 || true
    summary="$(python3 scripts/check_expect.py --flavour "$flavour" "$source" "$runs" 2>&1 | tee -a "$log" | tail -n 1 || true)"
    IFS=$'\t' read -r _ expected seen verdict <<<"$summary"
    if [[ $bare -ne 0 || ($rc -ne 0 && $rc -ne 23) ]]; then verdict=FAIL; fi
    [[ "$verdict" == PASS ]] || failures=$((failures + 1))
    rows+=("$name|$flavour|$expected|$seen|$bare|$rc|$verdict")
}

while read -r name source; do
    for flavour in static shared; do
        program="$work/samples/$flavour/$name"
        if [[ ! -x "$program" ]]; then
            rows+=("$name|$flavour|?|not built|-|-|FAIL")
            failures=$((failures + 1))
            continue
        fi
        check "$name" "$flavour" "$source" -- "$program"
    done
done < <(bash scripts/build-samples.sh --list)

for script in cuda-samples/python/*.py; do
    [[ -n "$prebuilt" ]] && break
    name="$(basename "$script" .py)"
    module="${name%%_*}" # torch_tensors -> torch, cupy_arrays -> cupy
    if ! python3 -c "import $module" >>"$log" 2>&1; then
        rows+=("$name|python|-|python3 cannot import $module|-|-|SKIP")
        continue
    fi
    check "$name" python "$script" -- python3 "$script"
done

table="$work/validation.md"
{
    grep -E '^(#|-) ' "$log" | head -n 6
    echo
    echo "| sample | flavour | expected | seen | bare exit | cudaleak exit | result |"
    echo "|---|---|---|---|---|---|---|"
    for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
    echo
    echo "$(( ${#rows[@]} - failures )) of ${#rows[@]} rows pass or skip; $failures fail."
} >"$table"

echo
printf '%-18s %-7s %-32s %-32s %-4s %-4s %s\n' sample flavour expected seen bare run result
for r in "${rows[@]}"; do
    IFS='|' read -r a b c d e f g <<<"$r"
    printf '%-18s %-7s %-32s %-32s %-4s %-4s %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g"
done
echo
tail -n 1 "$table"

if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    cp "$table" "$OUT/validation.md"
    cp "$log" "$OUT/gpu-validate.log"
    tar -czf "$OUT/dumps.tar.gz" -C "$work" runs
    echo "gpu-validate: wrote $OUT/validation.md, $OUT/gpu-validate.log, $OUT/dumps.tar.gz"
fi

[[ $failures -eq 0 && $build_ok -eq 1 ]]
