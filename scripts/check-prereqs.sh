#!/usr/bin/env bash
# scripts/check-prereqs.sh — checks, in a second, what `make test` needs (issue 44), before it
# spends minutes building: `make test` runs it first. Every missing tool is printed with the
# command that installs it, then it exits 1; with everything there it prints one line, exits 0.
#
# What it checks is what the Makefile's `test` recipe runs and what its CUDALEAK_REQUIRE_*
# variables make a failure rather than a skip (.ci/run installs the same on CI):
#   cargo, rustfmt, clippy             cargo fmt --check, cargo clippy
#   cc, c++                            tests/build.rs; nvcc's host compiler
#   python3 with venv and pip          scripts/wheel.sh (maturin, zig from PyPI), the wheel's
#                                      tests (CUDALEAK_REQUIRE_WHEEL), scripts/nvcc.sh
#   nvcc, or python3's pip to fetch it CUDALEAK_REQUIRE_SAMPLES (scripts/nvcc.sh)
#   Chromium                           CUDALEAK_REQUIRE_BROWSER (tests/tests/html_report.rs)
# Optional (make test skips what needs them and says so): curl, xz, dpkg-deb and patchelf for
# Debian's CPython 3.14 and 3.15 (scripts/debian-python.sh) where PATH has none.
#
# Must never: install anything, use the network, or call anything but shell builtins and the
# tools it checks (a test runs it with PATH=/nonexistent).
set -uo pipefail

missing=()
optional=()
need() { # NAME WHY HOW
    missing+=("  $1 — $2; install: $3")
}
has() { command -v "$1" >/dev/null 2>&1; }

has cargo || need cargo "builds everything" "https://rustup.rs (curl --proto '=https' -sSf https://sh.rustup.rs | sh)"
has rustfmt || need rustfmt "cargo fmt --all -- --check" "rustup component add rustfmt"
has cargo-clippy || need clippy "cargo clippy -- -D warnings" "rustup component add clippy"
has make || need make "runs the recipes" "apt-get install make"
has cc || need "cc (a C compiler)" "tests/build.rs builds the null-device runtime" "apt-get install gcc"
has c++ || has g++ || need "c++ (a C++ compiler)" "nvcc's host compiler" "apt-get install g++"

python=""
if has python3; then
    python=python3
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
        || need "python3's venv module" "scripts/wheel.sh and the wheel's tests make virtual environments" "apt-get install python3-venv"
    python3 -m pip --version >/dev/null 2>&1 \
        || need "python3's pip" "maturin, zig, pytest (and nvcc when there is none) come from PyPI" "apt-get install python3-pip"
else
    need python3 "scripts/wheel.sh, the wheel's and the Python tests" "apt-get install python3 python3-venv python3-pip"
fi

# nvcc as scripts/nvcc.sh finds it; without one it installs CUDA's compiler with pip (checked above).
if ! has nvcc && [[ ! -x "${CUDA_HOME:-/nonexistent}/bin/nvcc" && ! -x /usr/local/cuda/bin/nvcc ]] \
    && [[ -z "$python" ]]; then
    need nvcc "the cuda-samples tests (CUDALEAK_REQUIRE_SAMPLES)" \
        "a CUDA toolkit (nvcc on PATH, \$CUDA_HOME or /usr/local/cuda), or python3 with pip: scripts/nvcc.sh then fetches nvcc from PyPI"
fi

if [[ -z "${CUDALEAK_CHROMIUM:-}" ]] && ! has chromium && ! has chromium-browser && ! has google-chrome; then
    need chromium "the HTML report's browser test (CUDALEAK_REQUIRE_BROWSER)" \
        "apt-get install chromium (Debian), snap install chromium (Ubuntu), or CUDALEAK_CHROMIUM=/path/to/chrome"
fi

if ! has python3.14 || ! has python3.15; then
    for tool in curl xz dpkg-deb patchelf; do
        has "$tool" || optional+=("$tool")
    done
fi

if ((${#optional[@]})); then
    echo "check-prereqs: optional, missing: ${optional[*]} — without them the Python-frame tests under Debian's CPython 3.14 and 3.15 are skipped; install: apt-get install curl xz-utils dpkg patchelf" >&2
fi
if ((${#missing[@]})); then
    echo "check-prereqs: make test needs what is missing here:" >&2
    printf '%s\n' "${missing[@]}" >&2
    exit 1
fi
echo "check-prereqs: everything make test needs is here" >&2
