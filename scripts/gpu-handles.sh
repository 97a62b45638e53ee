#!/usr/bin/env bash
# scripts/gpu-handles.sh — library handles on a real GPU: a handle made per request and never
# destroyed is a leak at the program's create line; a handle made once per process is held.
# Each program in tests/gpu/handles/*.cu (cuBLAS, cuFFT, cuRAND, cuDNN, cuSOLVER, NCCL) is built with
# nvcc and run in each mode — leak (expected exit 23, the report naming the `// LEAK` line),
# one and clean (expected 0) — bare, then under `cudaleak run`; each leak mode once more under
# compute-sanitizer --leak-check full, its summary printed beside ours. The PyTorch (default and
# PYTORCH_NO_CUDA_MEMORY_CACHING=1), CuPy and JAX programs there must exit 0. Run through the
# device tool:
#
#   CUDALEAK_BIN_DIR=DIR scripts/gpu-handles.sh
#
# DIR holds cudaleak and libcudaleak.so. cuDNN and NCCL are looked for in $CUDNN_HOME and
# $NCCL_HOME, the CUDA toolkit and the Python wheels (site-packages/nvidia/*/{include,lib});
# without them cudnn_service and nccl_service are skipped.
# One line per run:
#   RESULT <name> <mode> expected=<0|23> got=<rc> <PASS|FAIL> line=<yes|no|-> handles="<rows>" bare=<rc> done=<yes|no>
# line: whether the report names <name>.cu:<the `// LEAK` line> (leak modes only); handles: the
# report's lines about handles, plans or generators; bare: the exit status without cudaleak;
# done: whether the program under cudaleak printed its last line. PASS needs got=expected,
# bare=0, done=yes and, in leak mode, line=yes. Ends with `TOTAL pass=X fail=Y skip=Z`; exits 0
# when nothing failed, 1 otherwise, 2 when it cannot start. With $OUT set, writes
# $OUT/handles.log (everything), $OUT/handles-sanitizer-NAME.txt and $OUT/handles-dumps.tar.gz.
# Each run is bounded (PROG_TIMEOUT, PY_TIMEOUT, CS_TIMEOUT seconds); a failure never stops it.
# ONLY="nccl_service torch_handles" runs those programs alone.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-$repo/target/release}"
cudaleak="$bin_dir/cudaleak"
cuda="${CUDA_HOME:-/usr/local/cuda}"
nvcc="$cuda/bin/nvcc"
sanitizer="$cuda/bin/compute-sanitizer"
src="$repo/tests/gpu/handles"
work="$(mktemp -d)"
log="${OUT:-$work}/handles.log"
prog_timeout="${PROG_TIMEOUT:-60}" py_timeout="${PY_TIMEOUT:-120}" cs_timeout="${CS_TIMEOUT:-60}"
export NO_COLOR=1 PYTHONUNBUFFERED=1
pass=0 fail=0 skip=0

# record LINE: a RESULT, SANITIZER or SKIP line, printed now and again in the closing list.
record() {
    echo "$*"
    echo "$*" >> "$work/results.txt"
}

# The report's lines about handles, plans, generators or communicators, "never destroyed" rows
# first, joined by " | ". Not stack frames, not the cache heading, and not a word in a path
# (these programs live in tests/gpu/handles/).
handle_rows() {
    awk '
        /^[[:space:]]*#[0-9]+ / || /^Held by caches and library handles:/ { next }
        {
            words = tolower($0)
            gsub(/[^[:space:]]*\/[^[:space:]]*/, "", words)
            if (words !~ /(^|[^a-z_])(handles?|plans?|generators?|communicators?)([^a-z_]|$)/) next
            sub(/^[[:space:]]+/, "")
            gsub(/"/, "\047")
            if (/never destroyed/) first[f++] = $0; else rest[r++] = $0
        }
        END {
            for (i = 0; i < r; i++) first[f++] = rest[i]
            for (i = 0; i < f && i < 4; i++) printf "%s%s", (i ? " | " : ""), first[i]
        }' "$1"
}

# wanted NAME: whether ONLY (if set) names it.
wanted() {
    [[ -z "${ONLY:-}" || " $ONLY " == *" $1 "* ]]
}

# check NAME MODE EXPECTED LEAK_LINE -- CMD...: CMD bare, then under `cudaleak run`; one RESULT.
# LEAK_LINE is the `// LEAK` line of NAME.cu, or - (not checked).
check() {
    local name="$1" mode="$2" expected="$3" leak_line="$4" limit="$prog_timeout"; shift 5
    [[ "$1" == python3 ]] && limit="$py_timeout"
    local report="$work/$name-$mode.report" t0 bare got line=- done=no verdict=FAIL handles
    t0=$SECONDS
    timeout "$limit" "$@" > "$work/$name-$mode.bare" 2>&1; bare=$?
    echo "== $name $mode: bare exit $bare in $((SECONDS - t0)) s: $(tail -n 1 "$work/$name-$mode.bare")"
    [[ "$bare" == 0 ]] || tail -n 20 "$work/$name-$mode.bare"
    t0=$SECONDS
    timeout "$limit" "$cudaleak" run --out "$work/out/$name-$mode" -- "$@" > "$report" 2>&1; got=$?
    echo "== $name $mode: cudaleak exit $got in $((SECONDS - t0)) s"
    cat "$report"
    if [[ "$leak_line" != - ]]; then
        line=no
        grep -qE "\b$name\.cu:$leak_line([^0-9]|$)" "$report" && line=yes
    fi
    grep -qE ', done$' "$report" && done=yes
    handles="$(handle_rows "$report")"
    if [[ "$got" == "$expected" && "$bare" == 0 && "$done" == yes && "$line" != no ]]; then
        verdict=PASS pass=$((pass + 1))
    else
        fail=$((fail + 1))
    fi
    record "RESULT $name $mode expected=$expected got=$got $verdict line=$line handles=\"$handles\" bare=$bare done=$done"
}

# sanitize NAME: the leak mode under compute-sanitizer, its summary beside our handle rows.
sanitize() {
    local name="$1" cs="$work/sanitizer-$name.txt" rc summary
    if [[ ! -x "$sanitizer" ]]; then
        record "SANITIZER $name leak: skipped, no $sanitizer"
        return
    fi
    timeout "$cs_timeout" "$sanitizer" --leak-check full "$work/$name" leak > "$cs" 2>&1; rc=$?
    [[ -n "${OUT:-}" ]] && cp "$cs" "$OUT/handles-sanitizer-$name.txt"
    echo "== $name leak: compute-sanitizer exit $rc, $(wc -l < "$cs") lines; its summaries:"
    grep -E 'LEAK SUMMARY|ERROR SUMMARY|Leaked [0-9]+ bytes' "$cs" | tail -n 3
    summary="$(grep -E 'LEAK SUMMARY|Leaked [0-9]+ bytes' "$cs" | tail -n 1 | sed -E 's/^=+ *//')"
    record "SANITIZER $name leak: compute-sanitizer: ${summary:-no leak reported (exit $rc)} | cudaleak: $(handle_rows "$work/$name-leak.report")"
}

# find_lib NAME [HOME]: prints the include and lib folders of a library with NAME.h and
# libNAME.so* (cudnn, nccl), one a line: in HOME, the toolkit, /usr or the Python wheels.
find_lib() {
    local name="$1" home="${2:-}" d
    for d in ${home:+"$home"} "$cuda" /usr; do
        if [[ -f "$d/include/$name.h" ]] && compgen -G "$d/lib*/lib$name.so*" > /dev/null; then
            echo "$d/include"
            dirname "$(compgen -G "$d/lib*/lib$name.so*" | head -n 1)"
            return
        fi
    done
    python3 - "$name" <<'PY' 2> /dev/null
import glob, os, site, sys
name = sys.argv[1]
roots = []
try:
    import importlib
    m = importlib.import_module("nvidia." + name)  # a namespace package in recent wheels
    roots += list(getattr(m, "__path__", []))
    if getattr(m, "__file__", None):
        roots.append(os.path.dirname(m.__file__))
except Exception:
    pass
dirs = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
dirs += [p for p in sys.path if p.endswith("-packages")]
for d in dirs:
    roots += glob.glob(os.path.join(d, "nvidia", "*"))
for r in dict.fromkeys(roots):
    inc, lib = os.path.join(r, "include"), os.path.join(r, "lib")
    if os.path.isfile(os.path.join(inc, name + ".h")) and glob.glob(os.path.join(lib, "lib" + name + ".so*")):
        print(inc)
        print(lib)
        break
PY
}

main() {
    echo "date: $(date -u +%FT%TZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null); $("$nvcc" --version 2> /dev/null | tail -n 1)"
    if [[ ! -x "$cudaleak" || ! -x "$nvcc" ]]; then
        echo "gpu-handles: needs $cudaleak (set CUDALEAK_BIN_DIR) and $nvcc (set CUDA_HOME)"
        return 2
    fi
    "$cudaleak" --version
    local cuda_lib="$cuda/lib64" name mode expected leak_line extra
    [[ -d "$cuda_lib" ]] || cuda_lib="$cuda/targets/x86_64-linux/lib"

    local -A libs=([cublas]=-lcublas [cufft]=-lcufft [curand]=-lcurand [cusolver]=-lcusolver [cudnn]=-lcudnn [nccl]=-lnccl)
    local dirs=() so lib
    for name in cublas_service cufft_service curand_service cudnn_service cusolver_service nccl_service; do
        wanted "$name" || continue
        extra=()
        lib="${name%_service}"
        if [[ "$lib" == cudnn || "$lib" == nccl ]]; then
            local home_var="${lib^^}_HOME"
            mapfile -t dirs < <(find_lib "$lib" "${!home_var:-}")
            if [[ ${#dirs[@]} -lt 2 ]]; then
                record "SKIP $name: no $lib.h and lib$lib.so* in \$$home_var, $cuda, /usr or the Python wheels (site-packages/nvidia/*/{include,lib})"
                skip=$((skip + 3))
                continue
            fi
            # A wheel ships lib$lib.so.N and no lib$lib.so for -l$lib to find: link through one.
            so="$(compgen -G "${dirs[1]}/lib$lib.so" || compgen -G "${dirs[1]}/lib$lib.so.[0-9]*" | sort | head -n 1)"
            mkdir -p "$work/$lib-link"
            ln -sf "$so" "$work/$lib-link/lib$lib.so"
            echo "$lib: ${dirs[0]}, $so"
            extra=(-I"${dirs[0]}" -L"$work/$lib-link" -Xlinker -rpath,"${dirs[1]}")
        fi
        leak_line="$(grep -n '^[^/]*// LEAK' "$src/$name.cu" | cut -d: -f1)"
        echo "== build $name (// LEAK at line ${leak_line:-?})"
        # RPATH rather than RUNPATH: it also serves the libraries that cuDNN and cuBLAS dlopen.
        if ! "$nvcc" -g -lineinfo -arch=sm_90 "${extra[@]}" -o "$work/$name" "$src/$name.cu" \
            "${libs[$lib]}" -Xlinker --disable-new-dtags -Xlinker -rpath,"$cuda_lib"; then
            for mode in leak one clean; do
                fail=$((fail + 1))
                record "RESULT $name $mode expected=- got=build-failed FAIL line=- handles=\"\" bare=- done=no"
            done
            continue
        fi
        for mode in leak one clean; do
            expected=0
            [[ "$mode" == leak ]] && expected=23
            check "$name" "$mode" "$expected" "$([[ "$mode" == leak ]] && echo "${leak_line:-0}" || echo -)" \
                -- "$work/$name" "$mode"
        done
        sanitize "$name"
    done

    # Python programs: PyTorch, CuPy and JAX each make their handles once and hold them.
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1
    if ! wanted torch_handles; then
        :
    elif python3 -c 'import torch' 2> /dev/null; then
        check torch_handles default 0 - -- python3 "$src/torch_handles.py"
        # The assignment holds for the function call only: both runs, bare and cudaleak.
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 check torch_handles nocache 0 - -- python3 "$src/torch_handles.py"
    else
        record "SKIP torch_handles: no torch"; skip=$((skip + 2))
    fi
    if ! wanted cupy_handles; then
        :
    elif python3 -c 'import cupy' 2> /dev/null; then
        check cupy_handles default 0 - -- python3 "$src/cupy_handles.py"
    else
        record "SKIP cupy_handles: no cupy"; skip=$((skip + 1))
    fi
    if ! wanted jax_handles; then
        :
    elif python3 -c 'import jax' 2> /dev/null; then
        check jax_handles default 0 - -- python3 "$src/jax_handles.py"
    else
        record "SKIP jax_handles: no jax"; skip=$((skip + 1))
    fi

    if [[ -n "${OUT:-}" && -d "$work/out" ]]; then
        tar czf "$OUT/handles-dumps.tar.gz" -C "$work/out" .
    fi
    echo "== summary"
    cat "$work/results.txt" 2> /dev/null
    echo "TOTAL pass=$pass fail=$fail skip=$skip"
    [[ "$fail" == 0 ]]
}

mkdir -p "$(dirname "$log")"
main "$@" 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
