#!/usr/bin/env bash
# scripts/cuda-toolkit.sh — prints the path of an nvcc of a given CUDA release, installing it
# outside the repository once; nothing else on stdout. Used by scripts/gpu-matrix.sh.
#
#   scripts/cuda-toolkit.sh 11.8 | 12.4 | 13.X.Y
#
# Where each comes from (the registries this project's machines reach):
#   11.8   Debian 12 (bookworm) non-free: nvidia-cuda-toolkit 11.8.89~11.8.0-5~deb12u1
#   12.4   Debian 13 (trixie) non-free:   nvidia-cuda-toolkit 12.4.131~12.4.1-2
#   13.X.Y PyPI, the nvidia-cuda-nvcc wheels of that release (scripts/nvcc.sh)
# PyPI's nvidia-cuda-nvcc-cu11 and -cu12 wheels carry ptxas and libnvvm but no nvcc (checked for
# 11.8.89, 12.4.131 and 12.9.86), so the 11.x and 12.x compilers come from Debian's packages:
# fetched with apt-get download (this machine's apt, Debian's archive; nothing is installed in
# the system) and unpacked into ${CUDALEAK_CUDA_CACHE_DIR:-~/.cache/cudaleak}/cuda-deb-VERSION/.
# Debian's nvcc reads an nvcc.profile with absolute /usr paths; the unpacked one gets a profile
# relative to itself ($(_HERE_)). Host compilers: 11.8 takes g++ 6–11 (Debian's wrapper picks
# the newest installed; `apt install g++-11` on Debian 12), 12.4 takes up to g++ 13.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${1:?usage: scripts/cuda-toolkit.sh 11.8|12.4|13.X.Y}"
cache_dir="${CUDALEAK_CUDA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cudaleak}"

case "$version" in
    13.*)
        CUDALEAK_NVCC_PYPI=1 CUDALEAK_CUDA_PYPI_VERSION="$version" \
            CUDALEAK_CUDA_CACHE="$cache_dir/cuda-$version" exec "$here/nvcc.sh"
        ;;
    11.8) suite=bookworm pin=11.8.89~11.8.0-5~deb12u1 cudart=libcudart11.0 ;;
    12.4) suite=trixie pin=12.4.131~12.4.1-2 cudart=libcudart12 ;;
    *)
        echo "cuda-toolkit: no source known for CUDA $version (11.8, 12.4 or 13.X.Y)" >&2
        exit 2
        ;;
esac

root="$cache_dir/cuda-deb-$version"
nvcc="$root/usr/lib/nvidia-cuda-toolkit/bin/nvcc"
if [[ -f "$root/.complete" && -x "$nvcc" ]]; then
    printf '%s\n' "$nvcc"
    exit 0
fi
for tool in apt-get dpkg-deb; do
    if ! command -v "$tool" >/dev/null; then
        echo "cuda-toolkit: CUDA $version comes from Debian's packages and this machine has no $tool" >&2
        exit 1
    fi
done

mkdir -p "$cache_dir"
exec 9>"$root.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -f "$root/.complete" && -x "$nvcc" ]]; then
    printf '%s\n' "$nvcc"
    exit 0
fi

echo "cuda-toolkit: fetching CUDA $version from Debian $suite non-free into $root (about 1.5 GB of packages, once)" >&2
tmp="$root.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial" "$tmp/debs" "$tmp/root"
cat >"$tmp/apt/cuda.sources" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
apt_opts=(-q -o "Dir::Etc::sourcelist=$tmp/apt/cuda.sources" -o Dir::Etc::sourceparts=/dev/null
    -o "Dir::State::Lists=$tmp/apt/lists" -o "Dir::Cache=$tmp/apt/cache")
log="$root.install.log"
if ! apt-get "${apt_opts[@]}" update >"$log" 2>&1; then
    echo "cuda-toolkit: apt-get update of Debian $suite failed; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
# The compiler, its headers and static runtime, the shared runtime, libdevice/NVVM, CUB/Thrust.
packages=(nvidia-cuda-toolkit nvidia-cuda-dev "$cudart" libnvvm4 libcub-dev libthrust-dev)
(cd "$tmp/debs" && apt-get "${apt_opts[@]}" download "${packages[@]}") >>"$log" 2>&1 || {
    echo "cuda-toolkit: apt-get download failed; last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
}
for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
got="$(dpkg-deb -f "$tmp"/debs/nvidia-cuda-toolkit_*.deb Version)"
if [[ "$got" != "$pin" ]]; then
    echo "cuda-toolkit: Debian $suite now has nvidia-cuda-toolkit $got, not $pin; using it" >&2
fi

bin="$tmp/root/usr/lib/nvidia-cuda-toolkit/bin"
rm -f "$bin/nvcc.profile"
cat >"$bin/nvcc.profile" <<'PROFILE'
# scripts/cuda-toolkit.sh: Debian's /etc/nvcc.profile, relative to this folder.
NVVMIR_LIBRARY_DIR = $(_HERE_)/../libdevice
PATH += $(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../../../include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../../x86_64-linux-gnu/stubs" "-L$(_HERE_)/../../x86_64-linux-gnu"
PROFILE

rm -rf "$root"
mv "$tmp/root" "$root"
touch "$root/.complete"
trap - EXIT
rm -rf "$tmp"
printf '%s\n' "$nvcc"
