#!/usr/bin/env bash
# scripts/gpu-matrix.sh — cuda-samples/ built with each CUDA release, checked on a GPU's driver.
#
#   scripts/gpu-matrix.sh build [-o DIR] [VERSION...]     # here; no GPU needed
#   scripts/gpu-matrix.sh run [--bin-dir BIN] DIR|DIR.tar.xz   # on the GPU machine
#   scripts/gpu-matrix.sh spy DIR|DIR.tar.xz                    # on the GPU machine
#
# build: for each VERSION (default: 11.8 12.4 13.0.88 13.5.37) takes that release's nvcc from
# scripts/cuda-toolkit.sh (11.8 and 12.4 from Debian's packages, 13.x from PyPI's wheels; each
# installed once outside the repository) and builds cuda-samples/ and tests/gpu/matrix/*.cu (CUDA
# graphs, as each release instantiates them) with scripts/build-samples.sh,
# static and `-cudart shared`, into DIR/VERSION/{static,shared}/, with that release's
# libcudart.so.MAJOR in DIR/VERSION/lib/ (the GPU machine has only its own toolkit's runtime) and
# nvcc's version in DIR/VERSION/nvcc-version. Then DIR.tar.xz (default DIR: build/matrix), small
# enough to carry to a GPU machine beside the working tree.
#
# run: each VERSION through `scripts/gpu-validate.sh --samples DIR/VERSION` (bare run, `cudaleak
# run`, scripts/check_expect.py against the sample's EXPECT lines, exactly as for the samples it
# builds itself), then one table: a row per sample, a column per release and flavour, PASS or
# FAIL. With $OUT set, writes $OUT/matrix.md and each release's validation.md and log under
# $OUT/VERSION/. Exit status 0 only if every cell passes.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
# Beside cuda-samples/: the graph programs each release instantiates its own way (they need a
# real driver; the null-device runtime has no graphs).
export CUDALEAK_SAMPLES_EXTRA="$repo/tests/gpu/matrix"

build() {
    local out="$repo/build/matrix"
    if [[ "${1:-}" == "-o" ]]; then
        out="$(mkdir -p "$2" && cd "$2" && pwd)"
        shift 2
    fi
    local versions=("$@")
    [[ ${#versions[@]} -gt 0 ]] || versions=(11.8 12.4 13.0.88 13.5.37)
    local v nvcc root major lib
    for v in "${versions[@]}"; do
        nvcc="$(bash scripts/cuda-toolkit.sh "$v")"
        root="$(cd "$(dirname "$nvcc")/.." && pwd)"
        major="${v%%.*}"
        rm -rf "${out:?}/$v"
        mkdir -p "$out/$v/lib"
        echo "gpu-matrix: building cuda-samples/ with CUDA $v ($nvcc)" >&2
        NVCC="$nvcc" bash scripts/build-samples.sh -o "$out/$v" both >&2
        "$nvcc" --version | grep -i release >"$out/$v/nvcc-version"
        # The shared runtime the `-cudart shared` builds were linked against.
        # (PyPI: nvidia/cu13/lib/; Debian: usr/lib/x86_64-linux-gnu/ beside the toolkit's folder.)
        lib="$( (find "$root/" "$root/../x86_64-linux-gnu/" -maxdepth 2 -name "libcudart.so.$major*" \
            2>/dev/null || true) | sort | head -n 1)"
        if [[ -z "$lib" ]]; then
            echo "gpu-matrix: no libcudart.so.$major* beside $nvcc" >&2
            exit 1
        fi
        cp -L "$lib" "$out/$v/lib/$(basename "$lib")"
        # The soname the programs ask for (libcudart.so.11.0, .12, .13).
        local soname
        soname="$(objdump -p "$out/$v/lib/$(basename "$lib")" | awk '/SONAME/ {print $2}')"
        [[ -e "$out/$v/lib/$soname" ]] || ln -s "$(basename "$lib")" "$out/$v/lib/$soname"
    done
    tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
    echo "gpu-matrix: $out.tar.xz ($(du -h "$out.tar.xz" | cut -f1))" >&2
    printf '%s\n' "$out.tar.xz"
}

run() {
    local bin_args=()
    if [[ "${1:-}" == "--bin-dir" ]]; then
        bin_args=(--bin-dir "$2")
        shift 2
    fi
    local dir
    dir="$(unpacked "${1:?usage: scripts/gpu-matrix.sh run [--bin-dir BIN] DIR|DIR.tar.xz}")"
    local out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-matrix-out.XXXXXX")}"
    mkdir -p "$out"
    local versions=() v failures=0
    while IFS= read -r v; do versions+=("$v"); done < <(releases "$dir")
    for v in "${versions[@]}"; do
        echo "gpu-matrix: CUDA $v" >&2
        OUT="$out/$v" bash scripts/gpu-validate.sh "${bin_args[@]}" --samples "$dir/$v" >"$out/$v.stdout" 2>&1 ||
            failures=$((failures + 1))
        tail -n 1 "$out/$v.stdout" >&2
    done
    python3 - "$out" "${versions[@]}" >"$out/matrix.md" <<'PY'
import sys, re
out, versions = sys.argv[1], sys.argv[2:]
cells, samples, head = {}, [], []
for v in versions:
    try:
        text = open(f"{out}/{v}/validation.md").read()
    except OSError:
        continue
    head += [l for l in text.splitlines() if l.startswith(("- GPU", "- nvidia-smi"))][:2]
    for line in text.splitlines():
        f = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(f) == 7 and f[1] in ("static", "shared"):
            if f[0] not in samples:
                samples.append(f[0])
            cells[(f[0], v, f[1])] = f[6] if f[6] == "PASS" else f"{f[6]} ({f[3]})"
print("\n".join(dict.fromkeys(head)))
print()
cols = [(v, fl) for v in versions for fl in ("static", "shared")]
print("| sample | " + " | ".join(f"{v} {fl}" for v, fl in cols) + " |")
print("|---|" + "---|" * len(cols))
for s in samples:
    print(f"| {s} | " + " | ".join(cells.get((s, v, fl), "not run") for v, fl in cols) + " |")
passed = sum(1 for c in cells.values() if c == "PASS")
print()
print(f"{passed} of {len(cells)} cells pass.")
PY
    cat "$out/matrix.md"
    [[ $failures -eq 0 ]]
}

# The releases a built matrix holds (its folders), oldest first.
releases() {
    find "$1" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V
}

# The folder a DIR|DIR.tar.xz argument names, unpacked into a temporary folder if need be.
unpacked() {
    local dir="$1" tmp
    if [[ "$dir" == *.tar.xz ]]; then
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-matrix.XXXXXX")"
        tar -C "$tmp" -xJf "$dir"
        dir="$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
    fi
    (cd "$dir" && pwd)
}

# spy DIR: every sample of every release, without cudaleak, under tests/gpu/matrix/gpa_spy.c;
# $OUT/requests-VERSION-FLAVOUR.tsv lists each distinct driver lookup the runtime made
# (cuGetProcAddress v1|v2, symbol, version, flags, result, the function the driver returned).
# tests/data/runtime-requests/ keeps these lists for the null-device tests.
spy() {
    local dir out v flavour program so
    dir="$(unpacked "${1:?usage: scripts/gpu-matrix.sh spy DIR|DIR.tar.xz}")"
    out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-spy.XXXXXX")}"
    mkdir -p "$out"
    so="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-spy-so.XXXXXX")/gpa_spy.so"
    cc -shared -fPIC -O1 -o "$so" tests/gpu/matrix/gpa_spy.c -ldl
    for v in $(releases "$dir"); do
        for flavour in static shared; do
            local log="$out/.raw-$v-$flavour"
            : >"$log"
            for program in "$dir/$v/$flavour"/*; do
                [[ -x "$program" && "$program" != *.so ]] || continue
                GPA_SPY_LOG="$log" LD_PRELOAD="$so" LD_LIBRARY_PATH="$dir/$v/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                    "$program" >/dev/null 2>&1 || true
            done
            sort -u "$log" >"$out/requests-$v-$flavour.tsv"
            rm -f "$log"
            echo "gpu-matrix: CUDA $v $flavour: $(wc -l <"$out/requests-$v-$flavour.tsv") distinct lookups" >&2
        done
    done
}

case "${1:-}" in
    build) shift; build "$@" ;;
    run) shift; run "$@" ;;
    spy) shift; spy "$@" ;;
    *) echo "usage: scripts/gpu-matrix.sh build [-o DIR] [VERSION...] | run [--bin-dir BIN] DIR|DIR.tar.xz | spy DIR|DIR.tar.xz" >&2; exit 2 ;;
esac
