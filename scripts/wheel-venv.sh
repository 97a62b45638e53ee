# scripts/wheel-venv.sh — sourced by the scripts that run the cudaleak wheel as a user installs it
# (gpu-pytest.sh, gpu-plugin-cost.sh, pytest-start.sh):
#
#   wheel_venv DIR WHEELS   a fresh virtual environment in DIR with the cudaleak wheel of WHEELS,
#                           which sees this machine's packages (its PyTorch, CuPy, pytest plugins)
wheel_venv() {
    local dir=$1 from=$2 purelib
    python3 -m venv --system-site-packages "$dir" || return 1
    # Where python3 is itself a virtual environment (the machine's PyTorch and CuPy live there),
    # the new one sees only the base interpreter's packages: name python3's own package
    # directories in a .pth file, after the venv's own, so it sees what python3 sees, as a
    # user's environment would.
    purelib=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    python3 -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
        >"$purelib/zz-machine-packages.pth"
    "$dir/bin/pip" install --quiet --no-index --find-links "$from" cudaleak \
        || { echo "pip install cudaleak from $from failed" >&2; return 1; }
}
