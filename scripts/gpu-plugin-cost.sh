#!/usr/bin/env bash
# scripts/gpu-plugin-cost.sh — where the pytest plugin's cost on the 20 correct PyTorch tests
# (tests/gpu/pytest/test_torch_suite.py) goes, on a GPU machine, beside an earlier wheel:
#
#   scripts/gpu-plugin-cost.sh BEFORE_WHEELS WHEELS OUT [REPS]
#
# Two fresh virtual environments that see the machine's packages, one with each wheel; one
# untimed warm-up run, then REPS rounds (default 2) of: no plugin, BEFORE_WHEELS' plugin,
# WHEELS' plugin (each `pytest --cudaleak` run's `checks:` line kept). Under OUT: times.txt (each
# run's wall milliseconds and checks line), why.txt (per test of WHEELS' runs, from the plugin's
# `cudaleak-cost` property in --junitxml: its own time before and after the call, gc.collect(),
# emptying, the CLI's verdicts, and why the pools were emptied), cli.txt (each wheel's CLI alone
# on the first test dumps, with their sizes), verdicts.txt (the whole suite, its leaking test included,
# in both allocator modes: what failed), gc.txt (gc.collect() in a process that imported PyTorch),
# importtime.txt (`python -X importtime` of pytest's start: what its plugins import), and each
# run's output. Asserts nothing; needs PyTorch with CUDA. Made from the device calls of issue 43's
# third session (docs/validation.md, 2026-12-07 17:56 and 19:12 UTC).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# -ge 3 ]] || { echo "usage: gpu-plugin-cost.sh BEFORE_WHEELS WHEELS OUT [REPS]" >&2; exit 2; }
before=$(realpath "$1")
wheels=$(realpath "$2")
out=$(mkdir -p "$3" && realpath "$3")
reps=${4:-2}
work=$(mktemp -d)
# shellcheck source=scripts/wheel-venv.sh
source scripts/wheel-venv.sh
wheel_venv "$work/new" "$wheels" || exit 1
wheel_venv "$work/old" "$before" || exit 1
cp tests/gpu/pytest/*.py "$work/"
printf 'def test_nothing():\n    pass\n' >"$work/test_empty.py"
cd "$work" || exit 1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; python3 -VV; } >"$out/env.txt" 2>&1
t() { # NAME COMMAND...: wall milliseconds and the checks line, into times.txt
    local name=$1 a b
    shift
    a=$(date +%s%N)
    "$@" >"$out/$name.txt" 2>&1
    b=$(date +%s%N)
    echo "$name $(((b - a) / 1000000)) ms $(grep -o 'checks: .*' "$out/$name.txt")" >>"$out/times.txt"
}
correct=(-k "not keeps_history" test_torch_suite.py)
t warm "$work/new/bin/python" -m pytest -q -p no:cacheprovider "${correct[@]}"
for ((i = 1; i <= reps; i++)); do
    t "plain-$i" "$work/new/bin/python" -m pytest -q -p no:cacheprovider "${correct[@]}"
    t "before-$i" "$work/old/bin/python" -m pytest -q -p no:cacheprovider --cudaleak "${correct[@]}"
    t "after-$i" "$work/new/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$out/after-$i.xml" --cudaleak "${correct[@]}"
done
"$work/new/bin/python" - "$out" >"$out/why.txt" 2>&1 <<'PY'
import ast, glob, sys, xml.etree.ElementTree as ET
for f in sorted(glob.glob(sys.argv[1] + "/after-*.xml")):
    print("==", f)
    for case in ET.parse(f).iter("testcase"):
        for p in case.iter("property"):
            if p.get("name") == "cudaleak-cost":
                v = ast.literal_eval(p.get("value"))
                ms = {k: v.get(k, 0) * 1e3 for k in ("before_s", "after_s", "gc_s", "empty_s", "cli_s")}
                print(f"{case.get('name'):28} {case.get('time'):>6} s  before {ms['before_s']:6.1f} ms"
                      f"  after {ms['after_s']:6.1f}  gc {ms['gc_s']:6.1f}  empty {ms['empty_s']:6.1f}"
                      f"  cli {ms['cli_s']:6.1f}  judged {v['judged']}  why {v['why']}")
PY
for f in $(ls cudaleak-out/run-*/test.*.json 2>/dev/null | head -4); do
    "$work/new/bin/python" -c "import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[1], 'live', len(d['live']), 'stacks', len(d['stacks']), 'modules', len(d['modules']))" "$f"
    for k in 1 2; do
        for cli in old new; do
            a=$(date +%s%N)
            "$work/$cli/bin/cudaleak" report --since 0 --pools-emptied --format json "$f" >/dev/null 2>&1
            b=$(date +%s%N)
            echo "  $cli cli $(((b - a) / 1000000)) ms"
        done
    done
done >"$out/cli.txt" 2>&1
t verdict-default "$work/new/bin/python" -m pytest -q -rA -p no:cacheprovider --cudaleak test_torch_suite.py
t verdict-exact "$work/new/bin/python" -m pytest -q -rA -p no:cacheprovider --cudaleak --cudaleak-exact-pools test_torch_suite.py
for n in verdict-default verdict-exact; do
    echo "$n: $(grep -E '^(FAILED|ERROR) ' "$out/$n.txt" | cut -c1-90 | tr '\n' ' ')" >>"$out/verdicts.txt"
done
"$work/new/bin/python" - >"$out/gc.txt" 2>&1 <<'PY'
import gc, time, torch
torch.zeros(1, device="cuda")
print("objects", len(gc.get_objects()))
for generation in (0, 1, 2):
    t = time.perf_counter(); gc.collect(generation)
    print(f"gc.collect({generation}) {(time.perf_counter() - t) * 1e3:.2f} ms")
PY
"$work/new/bin/python" -X importtime -m pytest -q -p no:cacheprovider --co test_empty.py 2>"$out/importtime.txt" >/dev/null
date -u >>"$out/env.txt"
