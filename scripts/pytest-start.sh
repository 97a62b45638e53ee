#!/usr/bin/env bash
# scripts/pytest-start.sh — what starting pytest under the plugin costs: pytest on a file with one
# empty test, without the plugin and with `--cudaleak`, under each wheel given (e.g. main's and a
# branch's), REPS times each (default 5), alternating, in fresh virtual environments that see this
# machine's packages (so its installed pytest plugins, which pytest imports at every start, count
# as they do for its users). Needs no GPU: the shim loads without a driver. Prints each run's wall
# time and the median per wheel as a Markdown table; asserts nothing.
#
# usage: scripts/pytest-start.sh WHEELS [WHEELS...] [REPS]
#   WHEELS  a directory with a cudaleak wheel (scripts/wheel.sh puts one in target/wheels)
set -uo pipefail
dirs=()
while [[ $# -gt 0 && ! $1 =~ ^[0-9]+$ ]]; do
    dirs+=("$(realpath "$1")")
    shift
done
[[ ${#dirs[@]} -ge 1 ]] || { echo "usage: pytest-start.sh WHEELS [WHEELS...] [REPS]" >&2; exit 2; }
reps=${1:-5}
# shellcheck source=scripts/wheel-venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/wheel-venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'def test_nothing():\n    pass\n' >"$work/test_empty.py"
for i in "${!dirs[@]}"; do
    venv="$work/venv$i"
    wheel_venv "$venv" "${dirs[$i]}" || exit 1
    "$venv/bin/python" -c 'import pytest' 2>/dev/null \
        || "$venv/bin/pip" install --quiet pytest >/dev/null \
        || { echo "pytest-start: no pytest" >&2; exit 1; }
done
plugins=$("$work/venv0/bin/python" -c 'from importlib.metadata import entry_points as e; print(", ".join(sorted(x.name for x in e(group="pytest11"))))')
ms() { # COMMAND...: its wall time in milliseconds
    local t0 t1
    t0=$(date +%s%N)
    (cd "$work" && "$@") >/dev/null 2>&1
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}
declare -A times
for ((r = 1; r <= reps; r++)); do
    times[plain]+=" $(ms "$work/venv0/bin/python" -m pytest -q -p no:cacheprovider test_empty.py)"
    for i in "${!dirs[@]}"; do
        times[$i]+=" $(ms "$work/venv$i/bin/python" -m pytest -q -p no:cacheprovider --cudaleak test_empty.py)"
    done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "pytest plugins installed: $plugins"
echo
echo "| run | wall times (ms) | median (ms) |"
echo "|---|---|---:|"
echo "| no plugin | ${times[plain]# } | $(echo "${times[plain]}" | median) |"
for i in "${!dirs[@]}"; do
    echo "| \`--cudaleak\`, ${dirs[$i]} | ${times[$i]# } | $(echo "${times[$i]}" | median) |"
done
