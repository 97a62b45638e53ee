#!/usr/bin/env bash
# scripts/build-samples.sh — the one place that knows how cuda-samples/ is built; used by
# `make samples`, tests/tests/samples.rs and scripts/gpu-validate.sh.
#
#   scripts/build-samples.sh [-o OUTDIR] [static|shared|both] [SAMPLE...]
#   scripts/build-samples.sh --list          # "NAME SOURCE" per sample, SOURCE holds its EXPECT lines
#
# Conventions (cuda-samples/README.md):
#   cuda-samples/NAME.cu            -> OUTDIR/FLAVOUR/NAME
#   cuda-samples/NAME/main.cu       -> OUTDIR/FLAVOUR/NAME, linked against every
#   cuda-samples/NAME/libLIB.cu     -> OUTDIR/FLAVOUR/libLIB.so (found through RUNPATH $ORIGIN)
#   a `// BUILD: FLAGS` line in a source adds FLAGS to its nvcc command (e.g. -lcuda).
# Flavours: static = nvcc's default (libcudart_static.a linked in), shared = `-cudart shared`.
# Every build has host debug info and device line info (-g -lineinfo) so reports show file:line.
#
# Environment: NVCC (default: scripts/nvcc.sh finds or installs one), CUDA_ARCH (default sm_90),
# NVCC_FLAGS (extra flags), CUDALEAK_SAMPLES_EXTRA (a folder of more one-file samples). Outputs newer than their inputs are not rebuilt.
# Must never write outside OUTDIR (default build/samples) — except scripts/nvcc.sh's own cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
src="$repo/cuda-samples"

list_samples() {
    local f d
    # CUDALEAK_SAMPLES_EXTRA: a folder of more one-file samples (scripts/gpu-matrix.sh's
    # tests/gpu/matrix/), built and checked like cuda-samples/*.cu.
    for f in "$src"/*.cu ${CUDALEAK_SAMPLES_EXTRA:+"$CUDALEAK_SAMPLES_EXTRA"/*.cu}; do
        [[ -e "$f" ]] || continue
        printf '%s %s\n' "$(basename "$f" .cu)" "$f"
    done
    for d in "$src"/*/; do
        [[ -f "$d/main.cu" ]] && printf '%s %s\n' "$(basename "$d")" "${d%/}/main.cu"
    done
    return 0
}

if [[ "${1:-}" == "--list" ]]; then
    list_samples
    exit 0
fi

out="$repo/build/samples"
if [[ "${1:-}" == "-o" ]]; then
    out="$(mkdir -p "$2" && cd "$2" && pwd)"
    shift 2
fi
flavours=(static shared)
case "${1:-both}" in
    static | shared) flavours=("$1"); shift ;;
    both) [[ $# -gt 0 ]] && shift ;;
esac
wanted=("$@")

nvcc="${NVCC:-$("$here/nvcc.sh")}"
cudalib="$(cd "$(dirname "$nvcc")/.." && pwd)/lib64"
arch="${CUDA_ARCH:-sm_90}"
# shellcheck disable=SC2206 # NVCC_FLAGS is a list of words on purpose
common=(-g -lineinfo -std=c++17 -arch="$arch" -I"$src" ${NVCC_FLAGS:-})

# Extra flags from `// BUILD:` lines.
build_flags() {
    sed -n 's|^[[:space:]]*//[[:space:]]*BUILD:[[:space:]]*||p' "$@"
}

# True when $1 exists and is newer than every other argument.
up_to_date() {
    local target="$1" f
    shift
    [[ -e "$target" ]] || return 1
    for f in "$@"; do
        [[ "$target" -nt "$f" ]] || return 1
    done
}

# nvcc OUT FLAVOUR SOURCES... -- EXTRA FLAGS...
compile() {
    local target="$1" flavour="$2"
    shift 2
    local -a sources=() extra=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do sources+=("$1"); shift; done
    [[ $# -gt 0 ]] && shift
    extra=("$@")
    local -a inputs=("${sources[@]}" "$src"/*.h "$(dirname "${sources[0]}")"/*.h "$here/build-samples.sh")
    if up_to_date "$target" "${inputs[@]}"; then return 0; fi
    local -a flav=()
    if [[ "$flavour" == shared ]]; then
        # RUNPATH (not RPATH) so that LD_LIBRARY_PATH — the null-device runtime in the tests —
        # still comes first.
        flav=(-cudart shared -Xlinker --enable-new-dtags -Xlinker "-rpath=$cudalib")
    fi
    echo "nvcc $flavour/$(basename "$target")" >&2
    # Into a temporary name, then renamed: a concurrent build or test never runs a half-written
    # binary.
    local tmp="$target.tmp.$$"
    # shellcheck disable=SC2046 # BUILD: flags are words
    if ! "$nvcc" "${common[@]}" "${flav[@]}" -o "$tmp" "${sources[@]}" "${extra[@]}" \
        $(build_flags "${sources[@]}"); then
        rm -f "$tmp"
        return 1
    fi
    mv -f "$tmp" "$target"
}

selected() {
    local name="$1" w
    [[ ${#wanted[@]} -eq 0 ]] && return 0
    for w in "${wanted[@]}"; do [[ "$w" == "$name" ]] && return 0; done
    return 1
}

for flavour in "${flavours[@]}"; do
    dir="$out/$flavour"
    mkdir -p "$dir"
    while read -r name source; do
        selected "$name" || continue
        if [[ "$(basename "$source")" == main.cu ]]; then
            sdir="$(dirname "$source")"
            libs=()
            for lib in "$sdir"/lib*.cu; do
                [[ -e "$lib" ]] || continue
                lname="$(basename "$lib" .cu)"
                compile "$dir/$lname.so" "$flavour" "$lib" -- -shared -Xcompiler -fPIC \
                    -Xlinker "-soname=$lname.so"
                libs+=("-l${lname#lib}")
            done
            # shellcheck disable=SC2016 # $ORIGIN is for the dynamic linker, not the shell
            compile "$dir/$name" "$flavour" "$source" -- -L"$dir" "${libs[@]}" \
                -Xlinker --enable-new-dtags -Xlinker '-rpath=$ORIGIN'
        else
            compile "$dir/$name" "$flavour" "$source" --
        fi
    done < <(list_samples)
done
