#!/usr/bin/env bash
# scripts/aarch64-smoke.sh — the aarch64 wheel, run where it can be run without an Arm machine:
# under qemu-user, against the null-device runtime built for aarch64.
#
#   scripts/aarch64-smoke.sh WHEEL
#
# WHEEL is cudaleak-*_aarch64.whl (scripts/wheel.sh --target aarch64-unknown-linux-gnu). Needs
# aarch64-linux-gnu-gcc with its C library (Debian: gcc-aarch64-linux-gnu), qemu-aarch64
# (qemu-user) and python3. Builds tests/nullcuda's driver and runtime and the leak_exit scenario
# for aarch64, then checks, each under qemu-aarch64:
#   1. the wheel's `cudaleak --version` runs;
#   2. leak_exit under the wheel's shim (LD_PRELOAD) writes a dump with its three blocks
#      (4096 + 8192 + 63590 bytes) at the lines marked in the source;
#   3. the wheel's `cudaleak report` reads that dump and exits 23 with the three blocks;
#   4. `cudaleak attach` refuses (exit 2: its injection is x86-64's).
# `cudaleak run` itself is not tried: it would start the program as a native one, and the
# machine has no binfmt handler for aarch64 programs. Prints what it checked; exit 0 when all
# passed, 1 when one failed, 2 when a tool is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -eq 1 ]] || { echo "usage: aarch64-smoke.sh WHEEL" >&2; exit 2; }
wheel=$(realpath "$1")
cc=${CC_AARCH64:-aarch64-linux-gnu-gcc}
for tool in "$cc" qemu-aarch64 python3; do
    command -v "$tool" >/dev/null || { echo "aarch64-smoke: $tool is missing" >&2; exit 2; }
done
sysroot=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
export QEMU_LD_PREFIX="$sysroot"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m zipfile -e "$wheel" "$work/wheel"
cli=$(echo "$work"/wheel/cudaleak-*.data/scripts/cudaleak)
shim=$(echo "$work"/wheel/cudaleak-*.data/data/lib/libcudaleak.so)
chmod +x "$cli"
file "$cli" "$shim" | sed "s|$work/wheel/||"

lib="$work/nullcuda"
mkdir -p "$lib"
flags=(-g -O1 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror -Itests/nullcuda/include)
"$cc" "${flags[@]}" -Wl,-soname,libcuda.so.1 -Wl,--version-script=tests/nullcuda/libcuda.map \
    -o "$lib/libcuda.so.1" tests/nullcuda/driver.c -lpthread
"$cc" "${flags[@]}" -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/nullcuda/libcudart.map \
    -o "$lib/libcudart.so.13" tests/nullcuda/runtime.c -ldl -lpthread
ln -s libcudart.so.13 "$lib/libcudart.so"
"$cc" -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror -Itests/nullcuda/include \
    -Itests/scenarios -o "$work/leak_exit" tests/scenarios/leak_exit.c -L"$lib" \
    -Wl,-rpath-link,"$lib" -lcudart

failed=0
check() { # WHAT CONDITION...
    local what=$1
    shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failed=1; fi
}

version=$(qemu-aarch64 "$cli" --version)
check "cudaleak --version under qemu-aarch64 ($version)" test "${version%% *}" = cudaleak

set +e
refusal=$(qemu-aarch64 "$cli" attach $$ 2>&1)
rc=$?
set -e
check "cudaleak attach refuses with exit 2 ($refusal)" test "$rc" -eq 2 -a -n "$(grep 'x86-64 Linux only' <<<"$refusal")"

mkdir -p "$work/dumps"
# qemu-aarch64 -E sets the variables of the emulated program, not of qemu itself.
qemu-aarch64 -E LD_LIBRARY_PATH="$lib" -E LD_PRELOAD="$shim" -E CUDALEAK_OUTPUT="$work/dumps/" \
    -E CUDALEAK_QUIET=1 "$work/leak_exit" >"$work/program.out" 2>&1
dump=$(ls "$work"/dumps/cudaleak.*.json 2>/dev/null | head -n 1)
check "leak_exit under the aarch64 shim left a dump" test -n "$dump"
[[ -n "$dump" ]] || exit 1

lines=$(for m in leak_a leak_b leak_c; do grep -n "@$m" tests/scenarios/leak_exit.c | cut -d: -f1; done | tr '\n' ' ')
set +e
report=$(qemu-aarch64 "$cli" report "$dump")
rc=$?
set -e
echo "$report" | grep -E '^(Leak|SUMMARY)'
check "cudaleak report exits 23 (leaks found)" test "$rc" -eq 23
check "the report's summary: 74.10 KiB in 3 allocations" grep -q "^SUMMARY: 74.10 KiB leaked in 3 allocations" <<<"$report"
for l in $lines; do
    check "the report names leak_exit.c:$l" grep -q "leak_exit.c:$l" <<<"$report"
done
exit "$failed"
