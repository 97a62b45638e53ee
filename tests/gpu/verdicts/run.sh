#!/usr/bin/env bash
# tests/gpu/verdicts/run.sh — on a machine with an NVIDIA GPU, PyTorch, JAX and CuPy: runs each
# program here under `cudaleak run` (and PyTorch and JAX once more with --exact-pools) and prints
# per run the exit status, what was held by caches, the leaks' first frames, teardown notes and
# quiet processes. Reports go to $OUT (default ./frameworks-out) as <name>.json.
#   tests/gpu/verdicts/run.sh [BIN_DIR]    (BIN_DIR holds cudaleak and libcudaleak.so)
set -u
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-$here/../../../target/release}"
out="${OUT:-$PWD/frameworks-out}"
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-fw.XXXXXX")"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import torch, jax, cupy; print("torch", torch.__version__, "jax", jax.__version__, "cupy", cupy.__version__)'
one() { # NAME SCRIPT [cudaleak run options...]
    local name="$1" script="$2"; shift 2
    "$bin/cudaleak" run --shim "$bin/libcudaleak.so" --out "$work/$name" "$@" \
        --format json -o "$out/$name.json" -- python3 "$here/$script" >"$work/$name.stdout" 2>"$work/$name.stderr"
    local rc=$?
    echo "== $name: exit $rc"
    python3 - "$out/$name.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
s = v["summary"]
print(f"  processes {s['processes']}, quiet {s['quiet_processes']}, leaked {s['leaked_bytes']} B in "
      f"{s['leaked_allocations']}, cached {s['cached_bytes']} B in {s['cached_allocations']}, "
      f"failed {s['failed_allocations']}, bad frees {s['bad_frees']}, teardown {s['teardown']}")
for c in v["caches"]:
    print(f"  held: {c['id']:15} {c['bytes']:>12} B in {c['allocations']}")
for g in v["leaks"]:
    fr = [f"{f['function'] or '?'} ({(f['module'] or '?').rsplit('/', 1)[-1]})" for f in g["frames"][:4]]
    print(f"  LEAK {g['bytes']} B via {g['api']}: " + " <- ".join(fr))
for t in v["teardown"]:
    fr = t["frames"][0] if t["frames"] else {}
    print(f"  teardown: {t['api']} {[e['code'] for e in t['errors']]} x{t['count']} "
          f"(during exit {t['during_exit']}) at {fr.get('function')}")
for f in v["failed_allocations"]:
    print(f"  failed: {f['api']} {[e['code'] for e in f['errors']]} x{f['count']}")
PY
    tail -n 2 "$work/$name.stderr" | sed 's/^/  stderr: /'
}
one torch_train torch_train.py
one torch_train_exact torch_train.py --exact-pools
one torch_user_leak torch_user_leak.py
one jax_step jax_step.py
one jax_step_exact jax_step.py --exact-pools
one cupy_pool cupy_pool.py
