#!/usr/bin/env bash
# scripts/debian-python.sh — a CPython that this machine's distribution does not have, taken
# from Debian's unstable suite and made runnable here, for the Python-frame tests (`make test`
# runs them under every `python3.N` it finds on PATH).
#
#   scripts/debian-python.sh VERSION DIR      e.g. scripts/debian-python.sh 3.14 ~/.cache/py3.14
#
# Downloads pythonX.Y-minimal, libpythonX.Y-minimal, libpythonX.Y-stdlib (ctypes),
# libpythonX.Y-dev (the headers the layout probe compiles against) and the C library they were
# built for from deb.debian.org's sid, unpacks them into DIR (nothing is installed system-wide),
# and points the interpreter at the unpacked C library and its loader (patchelf), so that
# DIR/usr/bin/pythonX.Y runs on an older glibc. Prints DIR/usr/bin: put it on PATH. Exits 1,
# saying why, if a package cannot be had (sid moves on: the file names are read from its index
# at each run). Needs curl, xz, dpkg-deb and patchelf.
set -euo pipefail

version="${1:?usage: debian-python.sh VERSION DIR}"
dir="${2:?usage: debian-python.sh VERSION DIR}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo "$(uname -m)-linux-gnu")"

for tool in curl xz dpkg-deb patchelf; do
    command -v "$tool" >/dev/null || { echo "debian-python: '$tool' is not installed" >&2; exit 1; }
done

if [[ -x "$dir/usr/bin/python$version" ]] && "$dir/usr/bin/python$version" -c 'import ctypes' 2>/dev/null; then
    echo "$dir/usr/bin"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
curl -fsS --retry 2 --max-time 300 "$mirror/dists/sid/main/binary-$arch/Packages.xz" -o "$work/Packages.xz"
xz -dc "$work/Packages.xz" >"$work/Packages"

rm -rf "$dir"
mkdir -p "$dir"
for package in "python$version-minimal" "libpython$version-minimal" "libpython$version-stdlib" \
    "libpython$version-dev" libc6; do
    file="$(awk -v p="Package: $package" '$0 == p { found = 1 } found && /^Filename:/ { print $2; exit }' "$work/Packages")"
    if [[ -z "$file" ]]; then
        echo "debian-python: sid has no package $package" >&2
        exit 1
    fi
    curl -fsS --retry 2 --max-time 300 "$mirror/$file" -o "$work/package.deb"
    dpkg-deb -x "$work/package.deb" "$dir"
done

lib="$dir/usr/lib/$multiarch"
loader="$(ls "$lib"/ld-linux*.so.* 2>/dev/null | head -n 1)"
[[ -n "$loader" ]] || { echo "debian-python: no loader in $lib" >&2; exit 1; }
# The interpreter's own C library first; the machine's libraries (libffi, zlib, expat …) after.
patchelf --set-interpreter "$loader" --force-rpath --set-rpath "$lib:/lib/$multiarch:/usr/lib/$multiarch" \
    "$dir/usr/bin/python$version"
"$dir/usr/bin/python$version" -c 'import ctypes, sysconfig' >&2 || {
    echo "debian-python: the unpacked python$version does not run here" >&2
    exit 1
}
echo "$dir/usr/bin"
