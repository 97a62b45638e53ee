#!/usr/bin/env bash
# scripts/wheel.sh — builds the cudaleak wheel (the `cudaleak` command, the shim, the pytest
# plugin) into target/wheels/ and prints its path, nothing else, on stdout.
#
# The wheel is maturin's `bin` bindings of cli/ (python/pyproject.toml): the CLI as the wheel's
# script, the shim as data installed to <prefix>/lib/libcudaleak.so, where the CLI looks for it
# (../lib/ from its own directory), and the python/cudaleak package with the pytest plugin. It is
# Python-version independent (py3-none); maturin checks the manylinux policy the binaries meet
# (auditwheel's rules) and tags the wheel with it. maturin is taken from PATH, else installed
# from PyPI into a cache directory outside the repository:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak/maturin
#
#   scripts/wheel.sh [--target TRIPLE] [--native]
#
# Both binaries are linked with `zig cc` against glibc 2.17's symbols (maturin --zig for the CLI,
# scripts/zig-cc for the shim), so the wheel is manylinux_2_17 (manylinux2014): pip installs it
# on any Linux with glibc 2.17 or newer (RHEL 7 and 8, Ubuntu 18.04 on), as PyTorch's own wheels
# need 2.28. zig is taken from PATH, else from the ziglang package installed beside maturin.
# --native links with this machine's compiler and glibc instead (no zig; the wheel is then
# tagged for this glibc, manylinux_2_34 on Debian 12).
#
# --target aarch64-unknown-linux-gnu cross-builds the aarch64 wheel: it needs that Rust target
# (rustup target add) and binutils for aarch64 (Debian: binutils-aarch64-linux-gnu; STRIP, default
# aarch64-linux-gnu-strip), and with --native a cross linker too
# (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER, default aarch64-linux-gnu-gcc). Only wheels of
# the same platform are replaced.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=""
native=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --target) target="$2"; shift 2 ;;
        --native) native=1; shift ;;
        *) echo "usage: scripts/wheel.sh [--target TRIPLE] [--native]" >&2; exit 2 ;;
    esac
done
strip_tool="${STRIP:-strip}"
platform=$(uname -m)
if [[ -n "$target" ]]; then
    platform="${target%%-*}"
    if [[ "$target" == aarch64-unknown-linux-gnu ]]; then
        strip_tool="${STRIP:-aarch64-linux-gnu-strip}"
        if [[ -n "$native" ]]; then
            export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}"
        fi
    fi
fi

maturin="$(command -v maturin || true)"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak/maturin"
if [[ -z "$maturin" ]]; then
    if [[ ! -x "$venv/bin/maturin" ]]; then
        echo "scripts/wheel.sh: installing maturin from PyPI into $venv" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet "maturin>=1.5,<2" >&2
    fi
    maturin="$venv/bin/maturin"
fi

maturin_args=()
if [[ -z "$native" ]]; then
    # The glibc the wheel is built for: what maturin --zig targets by default (manylinux2014).
    glibc=2.17
    if ! command -v zig >/dev/null; then
        if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import ziglang' 2>/dev/null; then
            echo "scripts/wheel.sh: installing zig (the ziglang package) from PyPI into $venv" >&2
            [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv" >&2
            "$venv/bin/pip" install --quiet "ziglang>=0.13,<1" >&2
        fi
        # A `zig` on PATH for maturin and scripts/zig-cc.
        mkdir -p "$venv/zig-bin"
        printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$venv/bin/python" >"$venv/zig-bin/zig"
        chmod +x "$venv/zig-bin/zig"
        export PATH="$venv/zig-bin:$PATH"
    fi
    # An explicit target, even for this machine's architecture: the linker set for it is used
    # for the shim only, not for the build scripts cargo runs here.
    target="${target:-$(uname -m)-unknown-linux-gnu}"
    triple_env=$(echo "$target" | tr 'a-z-' 'A-Z_')
    export "CARGO_TARGET_${triple_env}_LINKER=$PWD/scripts/zig-cc"
    export ZIG_CC_TARGET="${target%%-*}-linux-gnu.$glibc"
    maturin_args=(--zig --compatibility "manylinux_${glibc/./_}")
fi
built=target/release
[[ -n "$target" ]] && built="target/$target/release"

cargo build --release -p cudaleak-shim ${target:+--target "$target"} >&2
data=python/cudaleak.data/data/lib
mkdir -p "$data"
# The shim's own frames are internal (hidden in reports): its line tables would only triple
# the wheel's size.
cp "$built/libcudaleak.so" "$data/libcudaleak.so"
"$strip_tool" --strip-debug "$data/libcudaleak.so"

rm -f target/wheels/cudaleak-*_"$platform".whl
(cd python && "$maturin" build --release --strip ${target:+--target "$target"} "${maturin_args[@]}" --out ../target/wheels >&2)
ls target/wheels/cudaleak-*_"$platform".whl
