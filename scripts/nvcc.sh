#!/usr/bin/env bash
# scripts/nvcc.sh — prints the path of an nvcc that can build cuda-samples/, nothing else on stdout.
#
# Looks, in order: `nvcc` on PATH, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc. When there is
# none, installs the CUDA 13.0 compiler from the Python package index (nvidia-cuda-nvcc,
# nvidia-nvvm, nvidia-cuda-crt, nvidia-cuda-runtime) into a cache directory OUTSIDE the repository,
# says so in one line on stderr, and reuses that install on later runs:
#   ${CUDALEAK_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak/cuda-13.0.88}
#
# The wheels unpack to nvidia/cu13/{bin,nvvm,include,lib}. nvcc.profile there links from lib64/
# and lib64/stubs/, so this script adds `lib64 -> lib`, `libcudart.so -> libcudart.so.13` (for
# `-cudart shared`) and a link-time stub lib/stubs/libcuda.so (for `-lcuda`; the wheels ship no
# driver stub). The stub is built from the installed cuda.h, exactly as NVIDIA's own stubs are:
# every driver entry point, empty. At run time libcuda.so.1 is the real driver or the
# null-device one, never the stub (its SONAME is libcuda.so.1 but it lives only in stubs/).
#
# Must never write inside the repository, and never print anything but the path on stdout.
set -euo pipefail

# Pinned: the same release as the GPU machine's /usr/local/cuda (13.0.88).
CUDA_PYPI_VERSION="${CUDALEAK_CUDA_PYPI_VERSION:-13.0.88}"

# nvcc compiles host code with a C++ compiler; without one it fails on the first sample with a
# message that does not say so. (NVCC_FLAGS="-ccbin ..." names another one.)
if [[ "${NVCC_FLAGS:-}" != *-ccbin* ]] && ! command -v g++ >/dev/null && ! command -v c++ >/dev/null; then
    echo "cudaleak: nvcc needs a C++ host compiler and there is none (g++, c++): install g++ (Debian/Ubuntu: apt install g++), or set NVCC_FLAGS=\"-ccbin PATH\"" >&2
    exit 1
fi

found() {
    printf '%s\n' "$1"
    exit 0
}

# CUDALEAK_NVCC_PYPI=1: the PyPI release only (scripts/cuda-toolkit.sh asks for a given 13.x).
if [[ "${CUDALEAK_NVCC_PYPI:-}" != 1 ]]; then
    if p="$(command -v nvcc 2>/dev/null)"; then found "$p"; fi
    if [[ -n "${CUDA_HOME:-}" && -x "$CUDA_HOME/bin/nvcc" ]]; then found "$CUDA_HOME/bin/nvcc"; fi
    if [[ -x /usr/local/cuda/bin/nvcc ]]; then found /usr/local/cuda/bin/nvcc; fi
fi

cache="${CUDALEAK_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak/cuda-$CUDA_PYPI_VERSION}"
root="$cache/nvidia/cu13"
nvcc="$root/bin/nvcc"
if [[ -f "$cache/.complete" && -x "$nvcc" ]]; then found "$nvcc"; fi

mkdir -p "$(dirname "$cache")"
# One installer at a time (make and the tests may both ask); the others wait and reuse it.
exec 9>"$cache.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -f "$cache/.complete" && -x "$nvcc" ]]; then found "$nvcc"; fi

python="$(command -v python3 || command -v python || true)"
if [[ -z "$python" ]] || ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "cudaleak: no nvcc found (PATH, \$CUDA_HOME, /usr/local/cuda) and no python3 with pip to install one from PyPI" >&2
    exit 1
fi
cc="$(command -v cc || command -v gcc || true)"
if [[ -z "$cc" ]]; then
    echo "cudaleak: no nvcc found and no C compiler (cc/gcc) to build the driver stub with" >&2
    exit 1
fi

if [[ "${CUDALEAK_NVCC_PYPI:-}" == 1 ]]; then
    echo "cudaleak: installing the CUDA $CUDA_PYPI_VERSION compiler from PyPI into $cache (about 250 MB, once)" >&2
else
    echo "cudaleak: no nvcc on PATH or in \$CUDA_HOME; installing the CUDA $CUDA_PYPI_VERSION compiler from PyPI into $cache (about 250 MB, once)" >&2
fi

tmp="$cache.tmp.$$"
log="$cache.install.log"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
if ! "$python" -m pip install --disable-pip-version-check --no-input --no-deps --quiet \
    --target "$tmp" \
    "nvidia-cuda-nvcc==$CUDA_PYPI_VERSION" "nvidia-nvvm==$CUDA_PYPI_VERSION" \
    "nvidia-cuda-crt==$CUDA_PYPI_VERSION" "nvidia-cuda-runtime==$CUDA_PYPI_VERSION" >"$log" 2>&1; then
    echo "cudaleak: pip install of the CUDA compiler failed; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
fi

troot="$tmp/nvidia/cu13"
for f in bin/nvcc nvvm/bin/cicc include/cuda.h include/cuda_runtime.h lib/libcudart.so.13 lib/libcudart_static.a; do
    if [[ ! -e "$troot/$f" ]]; then
        echo "cudaleak: the PyPI CUDA packages lack nvidia/cu13/$f; cannot use them (see $log)" >&2
        exit 1
    fi
done
ln -sfn lib "$troot/lib64"
ln -sfn libcudart.so.13 "$troot/lib/libcudart.so"

# Link-time driver stub: one empty function per CUresult-returning entry point that cuda.h
# declares after its own macro renaming (cuMemAlloc -> cuMemAlloc_v2 and so on).
mkdir -p "$troot/lib/stubs"
"$cc" -E -P -I"$troot/include" "$troot/include/cuda.h" \
    | grep -oE 'CUresult[[:space:]]+cu[A-Za-z0-9_]+[[:space:]]*\(' \
    | sed -E 's/^CUresult[[:space:]]+//; s/[[:space:]]*\($//' \
    | sort -u | sed -E 's/.*/void &(void) {}/' >"$troot/lib/stubs/libcuda_stub.c"
"$cc" -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$troot/lib/stubs/libcuda.so" "$troot/lib/stubs/libcuda_stub.c"

rm -rf "$cache"
mv "$tmp" "$cache"
trap - EXIT
touch "$cache/.complete"
found "$nvcc"
