#!/usr/bin/env bash
# scripts/gpu-pytest.sh — the pytest plugin on a GPU machine, as a user runs it: the cudaleak
# wheel installed with pip into a fresh virtual environment (which sees the machine's PyTorch
# and CuPy), then tests/gpu/pytest/'s PyTorch and CuPy suites (20 correct tests and one that
# keeps a tensor or array each) under `pytest --cudaleak`, in the default allocator mode and
# with --cudaleak-exact-pools, once under xdist, and without the plugin for the time it costs;
# then the time on the 20 correct tests alone (no plugin, the shim preloaded without the
# plugin, the plugin: three times each, alternating), PyTorch's import and CUDA start without
# and with the shim, and tests/gpu/pytest/probe_torch.py (what the plugin asks of PyTorch).
#
# usage: scripts/gpu-pytest.sh WHEELS OUT
#        scripts/gpu-pytest.sh --cost BEFORE_WHEELS WHEELS OUT [REPS]
#   WHEELS  a directory with the cudaleak wheel (make wheel) and, where the machine has no
#           package index, pytest's and pytest-xdist's wheels (pip download pytest pytest-xdist)
#   OUT     where each run's output goes (SUITE-MODE.txt), probe_torch.txt, and summary.txt: per
#           run, the exit status, the wall time, and the tests that failed
#   --cost  only the plugin's cost on the 20 correct PyTorch tests, and what it is made of: REPS
#           rounds (default 3), each running in turn no plugin, the shim preloaded without the
#           plugin, BEFORE_WHEELS' plugin, WHEELS' plugin, and WHEELS' plugin with PyTorch's
#           allocation record left off (tests/gpu/pytest/cudaleak_norecord.py); then the verdicts
#           of both suites under WHEELS' plugin in both allocator modes. Each plugin run's
#           `checks:` line (the plugin's own time before and after the calls) is kept in the
#           summary. COST_RUNS (default "plain shim-only before after norecord") and VERDICTS
#           (default "torch-default torch-exact cupy-default cupy-exact") choose among them, for
#           a device call short of time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cost_mode=0
if [[ ${1:-} == --cost ]]; then
    cost_mode=1
    before_wheels=$(realpath "$2")
    shift 2
fi
wheels=$(realpath "$1")
out=$(mkdir -p "$2" && realpath "$2")
reps=${3:-3}
work=$(mktemp -d)
# shellcheck source=scripts/wheel-venv.sh
source scripts/wheel-venv.sh
make_venv() { # DIR WHEELS: a venv in DIR with the cudaleak wheel of WHEELS
    local dir=$1 from=$2
    wheel_venv "$dir" "$from" || exit 1
    # The machine's own pytest and pytest-xdist serve when they import (the venv sees them);
    # WHEELS supplies them only where they are missing.
    "$dir/bin/python" -c 'import pytest, xdist' 2>/dev/null \
        || "$dir/bin/pip" install --quiet --no-index --find-links "$from" pytest pytest-xdist \
        || { echo "gpu-pytest: pip install pytest pytest-xdist failed" >&2; exit 1; }
}
make_venv "$work/venv" "$wheels"
if ((cost_mode)); then
    make_venv "$work/venv-before" "$before_wheels"
fi
"$work/venv/bin/python" -c 'import pytest, xdist; print("pytest", pytest.__version__, "xdist", xdist.__version__)' >"$out/versions.txt" 2>&1
cp tests/gpu/pytest/*.py "$work/"
summary="$out/summary.txt"
: >"$summary"
seconds() { # T0 T1: nanosecond stamps (date +%s%N) -> seconds between them
    awk -v a="$1" -v b="$2" 'BEGIN { print (b - a) / 1e9 }'
}
run() { # NAME ARGS...: pytest in the venv $VENV (default: WHEELS')
    local name=$1
    shift
    local t0 t1 rc
    t0=$(date +%s%N)
    # shellcheck disable=SC2086 # RUN_ENV: KEY=VALUE words for env, when set
    (cd "$work" && env ${RUN_ENV:-} "${VENV:-$work/venv}/bin/python" -m pytest -rA -p no:cacheprovider "$@") >"$out/$name.txt" 2>&1
    rc=$?
    t1=$(date +%s%N)
    local failed
    # FAILED and ERROR lines of -rA's summary (a collection error is not a verdict on a test).
    failed=$(grep -E '^(FAILED|ERROR) ' "$out/$name.txt" | sed -E 's/^(FAILED|ERROR) ([^ ]+).*/\1 \2/' | tr '\n' ' ')
    local checks
    checks=$(grep -o 'checks: .*' "$out/$name.txt" | head -1)
    printf '%-26s exit %s  %6.2f s  failed: %s%s\n' "$name" "$rc" "$(seconds "$t0" "$t1")" \
        "${failed:-none}" "${checks:+  ($checks)}" | tee -a "$summary"
}
# One untimed run of each suite first: the first process on a fresh machine fills the kernel,
# module and page caches, and would time that rather than the plugin.
warm_up() {
    for suite in torch cupy; do
        (cd "$work" && "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "test_${suite}_suite.py") >"$out/$suite-warm-up.txt" 2>&1
    done
}
correct=(-k "not keeps_history" test_torch_suite.py)
if ((cost_mode)); then
    warm_up
    shim_env=$("$work/venv/bin/cudaleak" env --out "$work/shim-only")
    cost_runs=" ${COST_RUNS:-plain shim-only before after norecord} "
    verdicts=" ${VERDICTS:-torch-default torch-exact cupy-default cupy-exact} "
    for ((i = 1; i <= reps; i++)); do
        [[ $cost_runs == *" plain "* ]] && run "correct-plain-$i" "${correct[@]}"
        [[ $cost_runs == *" shim-only "* ]] \
            && RUN_ENV="CUDALEAK_QUIET=1 $shim_env" run "correct-shim-only-$i" "${correct[@]}"
        [[ $cost_runs == *" before "* ]] \
            && VENV=$work/venv-before run "correct-plugin-before-$i" --cudaleak "${correct[@]}"
        [[ $cost_runs == *" after "* ]] && run "correct-plugin-$i" --cudaleak "${correct[@]}"
        [[ $cost_runs == *" norecord "* ]] \
            && run "correct-plugin-norecord-$i" --cudaleak -p cudaleak_norecord "${correct[@]}"
    done
    for suite in torch cupy; do
        [[ $verdicts == *" $suite-default "* ]] && run "$suite-default" --cudaleak "test_${suite}_suite.py"
        [[ $verdicts == *" $suite-exact "* ]] \
            && run "$suite-exact" --cudaleak --cudaleak-exact-pools "test_${suite}_suite.py"
    done
    cat "$out/versions.txt" >>"$summary"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$summary" 2>&1
    exit 0
fi
warm_up
for suite in torch cupy; do
    file="test_${suite}_suite.py"
    run "$suite-plain" "$file"
    run "$suite-default" --cudaleak "$file"
    run "$suite-exact" --cudaleak --cudaleak-exact-pools "$file"
done
run torch-default-xdist2 --cudaleak -n 2 test_torch_suite.py
# The cost without a failing test, and what it is made of: the 20 correct tests without the
# plugin, with the shim preloaded but the plugin off, and with the plugin, alternating three
# times; then PyTorch's import and CUDA start alone, without and with the shim.
shim_env=$("$work/venv/bin/cudaleak" env --out "$work/shim-only")
for i in 1 2 3; do
    run "correct-plain-$i" "${correct[@]}"
    RUN_ENV="CUDALEAK_QUIET=1 $shim_env" run "correct-shim-only-$i" "${correct[@]}"
    run "correct-plugin-$i" --cudaleak "${correct[@]}"
done
start() { # NAME ENV...
    local name=$1 t0 t1
    shift
    t0=$(date +%s%N)
    env "$@" "$work/venv/bin/python" -c 'import torch; torch.zeros(1, device="cuda"); torch.cuda.synchronize()' >/dev/null 2>&1
    t1=$(date +%s%N)
    printf '%-22s %6.2f s\n' "$name" "$(seconds "$t0" "$t1")" | tee -a "$summary"
}
for i in 1 2 3; do
    start "torch-start-$i" CUDALEAK_QUIET=1
    # shellcheck disable=SC2086
    start "torch-start-shim-$i" CUDALEAK_QUIET=1 $shim_env
done
"$work/venv/bin/python" tests/gpu/pytest/probe_torch.py >"$out/probe_torch.txt" 2>&1
cat "$out/versions.txt" >>"$summary"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$summary" 2>&1
python3 -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, "cupy", cupy.__version__)' >>"$summary" 2>&1
exit 0
