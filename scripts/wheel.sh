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
#   scripts/wheel.sh [--target TRIPLE]
#
# --target aarch64-unknown-linux-gnu cross-builds the aarch64 wheel: it needs that Rust target
# (rustup target add) and a cross linker and binutils (Debian: gcc-aarch64-linux-gnu), named by
# CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER (default aarch64-linux-gnu-gcc) and STRIP
# (default aarch64-linux-gnu-strip). Only wheels of the same platform are replaced.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=""
if [[ "${1:-}" == "--target" ]]; then
    target="$2"
    shift 2
fi
built=target/release
strip_tool="${STRIP:-strip}"
platform=$(uname -m)
if [[ -n "$target" ]]; then
    built="target/$target/release"
    platform="${target%%-*}"
    if [[ "$target" == aarch64-unknown-linux-gnu ]]; then
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER:-aarch64-linux-gnu-gcc}"
        strip_tool="${STRIP:-aarch64-linux-gnu-strip}"
    fi
fi

cargo build --release -p cudaleak-shim ${target:+--target "$target"} >&2
data=python/cudaleak.data/data/lib
mkdir -p "$data"
# The shim's own frames are internal (hidden in reports): its line tables would only triple
# the wheel's size.
cp "$built/libcudaleak.so" "$data/libcudaleak.so"
"$strip_tool" --strip-debug "$data/libcudaleak.so"

maturin="$(command -v maturin || true)"
if [[ -z "$maturin" ]]; then
    venv="${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak/maturin"
    if [[ ! -x "$venv/bin/maturin" ]]; then
        echo "scripts/wheel.sh: installing maturin from PyPI into $venv" >&2
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install --quiet "maturin>=1.5,<2" >&2
    fi
    maturin="$venv/bin/maturin"
fi
rm -f target/wheels/cudaleak-*_"$platform".whl
(cd python && "$maturin" build --release --strip ${target:+--target "$target"} --out ../target/wheels >&2)
ls target/wheels/cudaleak-*_"$platform".whl
