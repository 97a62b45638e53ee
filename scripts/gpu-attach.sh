#!/usr/bin/env bash
# scripts/gpu-attach.sh — `cudaleak attach` on a real GPU, for docs/validation.md ("attach").
#
#   scripts/gpu-attach.sh [--bin-dir DIR]        (or CUDALEAK_BIN_DIR=DIR)
#
# DIR holds prebuilt `cudaleak` and `libcudaleak.so` (default: bin/ beside this script, else
# target/release, else .device/bin). Four programs, one after the other, each run for
# BEFORE + FOR + AFTER seconds of steps and attached to once, BEFORE seconds after its first
# step (default 10, 15 and 8), with `cudaleak attach --for FOR PID`:
#   1. slow_leak: a C++ program built with nvcc's default static runtime; every step allocates
#      and frees 8 MiB scratch around a kernel, and every 10th step keeps 1 MiB (the leak, at the
#      line marked LEAK);
#   2. train.py leak: a PyTorch MLP training loop that keeps a 4 MiB tensor every step (the line
#      marked KEEP), with PyTorch's default caching allocator;
#   3. train.py clean: the same loop keeping nothing;
#   4. train.py leak started with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (each tensor
#      its own driver allocation, as under `run --exact-pools`).
# Each program prints, once a second, its own mean step time (the step only, not its sleep). The
# script prints the mean before, while and after attached, the attach and detach times cudaleak
# reports, the growth verdict, the cache note, and whether the report names the leaking line
# (or, failing that, whether the suspect's whole stack has it: `report --growth --frames 64`). With $OUT set,
# everything is written there too: attach.log (all output), summary.md (the table) and
# details.tar.gz (each program's log, cudaleak's stderr and report).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin_dir="${CUDALEAK_BIN_DIR:-}"
if [[ "${1:-}" == "--bin-dir" ]]; then
    bin_dir="$2"
    shift 2
fi
if [[ -z "$bin_dir" ]]; then
    for d in "$here/bin" "$here/../target/release" "$here/../.device/bin"; do
        if [[ -x "$d/cudaleak" && -f "$d/libcudaleak.so" ]]; then bin_dir="$d"; break; fi
    done
fi
bin_dir="$(cd "${bin_dir:-.}" && pwd)"
cudaleak="$bin_dir/cudaleak"
export CUDALEAK_SHIM="$bin_dir/libcudaleak.so"
BEFORE="${BEFORE:-10}" FOR="${FOR:-15}" AFTER="${AFTER:-8}"
out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-attach.XXXXXX")}"
work="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-attach-work.XXXXXX")"
res="$work/results"
mkdir -p "$res" "$out"
exec > >(tee -a "$out/attach.log") 2>&1

echo "# cudaleak attach on a GPU, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
echo "- nvidia-smi: $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*')"
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
echo "- nvcc: $("$nvcc" --version | grep -i release)"
echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -n 1)"
echo "- Yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none); uid $(id -u)"
echo "- cudaleak: $("$cudaleak" --version) from $bin_dir"
echo "- phases: $BEFORE s before, --for $FOR s attached, $AFTER s after"

cat >"$work/slow_leak.cu" <<'EOF'
// slow_leak: a service loop that leaks 1 MiB every 10th step (static cudart, nvcc's default).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

__global__ void scale(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}

static std::vector<void *> requests;

__attribute__((noinline)) void remember_request(size_t bytes) {
    void *p = nullptr;
    cudaMalloc(&p, bytes); // LEAK
    requests.push_back(p);
}

static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 30;
    int n = 1 << 24;
    float *buf = nullptr;
    cudaMalloc(&buf, n * sizeof(float));
    double start = now(), last = start, sum = 0;
    long steps = 0, window = 0;
    while (now() - start < seconds) {
        auto s = std::chrono::steady_clock::now();
        void *tmp = nullptr;
        cudaMalloc(&tmp, 8 << 20);
        scale<<<(n + 255) / 256, 256>>>(buf, n);
        cudaMemsetAsync(tmp, 0, 8 << 20);
        cudaDeviceSynchronize();
        cudaFree(tmp);
        if (steps % 10 == 0) remember_request(1 << 20);
        sum += std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
        steps++, window++;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (now() - last >= 1.0) {
            printf("t=%.3f steps=%ld mean_ms=%.4f\n", now(), window, 1000 * sum / window);
            fflush(stdout);
            last = now(), sum = 0, window = 0;
        }
    }
    printf("slow_leak: %ld steps, %zu requests kept\n", steps, requests.size());
    return 0;
}
EOF
cat >"$work/train.py" <<'EOF'
# train.py MODE SECONDS: an MLP training loop; MODE leak keeps a 4 MiB tensor every step.
import sys, time
import torch

mode, seconds = sys.argv[1], float(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)
).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 1024, device="cuda")
y = torch.randn(512, 1024, device="cuda")
kept = []


def train_step():
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


start = last = time.time()
window, steps = [], 0
while time.time() - start < seconds:
    s = time.perf_counter()
    loss = train_step()
    if mode == "leak":
        kept.append(torch.empty(1 << 20, device="cuda"))  # KEEP
    torch.cuda.synchronize()
    window.append(time.perf_counter() - s)
    steps += 1
    time.sleep(0.01)
    if time.time() - last >= 1.0:
        print(f"t={time.time():.3f} steps={len(window)} mean_ms={1000 * sum(window) / len(window):.4f}", flush=True)
        window, last = [], time.time()
print(f"train.py {mode}: {steps} steps, {len(kept)} tensors kept", flush=True)
EOF

cat >"$work/phases.py" <<'EOF'
# phases.py PROGRAM_LOG T_ATTACH T_ATTACHED T_DETACH T_DETACHED: mean step time per phase.
import re, sys
log, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:6])
phases = {"before": [], "while": [], "after": []}
for line in open(log):
    m = re.match(r"t=([\d.]+) steps=(\d+) mean_ms=([\d.]+)", line)
    if not m:
        continue
    t, n, ms = float(m[1]), int(m[2]), float(m[3])
    start = t - 1.0  # each line covers the second before it
    if t <= t0:
        phases["before"].append((n, ms))
    elif start >= t1 and t <= t2:
        phases["while"].append((n, ms))
    elif start >= t3:
        phases["after"].append((n, ms))
def mean(rows):
    steps = sum(n for n, _ in rows)
    return (sum(n * ms for n, ms in rows) / steps, steps, len(rows)) if steps else (float("nan"), 0, 0)
print(" | ".join(f"{k} {v[0]:.3f} ms ({v[1]} steps, {v[2]} s)" for k, v in ((k, mean(r)) for k, r in phases.items())))
EOF

"$nvcc" -O2 -g -o "$work/slow_leak" "$work/slow_leak.cu" || { echo "nvcc failed"; exit 1; }
echo "- slow_leak links: $(nm -D "$work/slow_leak" | grep -c ' U cuda' || true) cuda* imports (0: static runtime)"
echo
header() {
    echo "| program | attach | detach | growth verdict | cache note | leaking line named | mean step before / while / after |"
    echo "|---|---|---|---|---|---|---|"
}
header
rows=()

experiment() { # name marker-file marker command...
    local name="$1" file="$2" marker="$3"
    shift 3
    local total=$((BEFORE + FOR + AFTER + 4))
    "$@" "$total" >"$res/$name.program.log" 2>"$res/$name.program.err" &
    local pid=$!
    # BEFORE counts from the program's first step report: start-up (PyTorch's import, CUDA's
    # context) is not a step, and the "before" phase needs steps to compare with.
    local waited=0
    until grep -q '^t=' "$res/$name.program.log" 2>/dev/null || ((waited >= 120)); do
        sleep 0.2
        waited=$((waited + 1))
    done
    sleep "$BEFORE"
    local t0 t3
    t0=$(date +%s.%N)
    timeout 300 "$cudaleak" attach --for "$FOR" --out "$work/out-$name" "$pid" \
        >"$res/$name.report.txt" 2>"$res/$name.attach.err"
    local rc=$?
    # Detached: when the detach dump was written (the report comes after).
    t3=$(python3 -c "import glob, os; print(max(os.path.getmtime(f) for f in glob.glob('$work/out-$name/*/cudaleak.$pid.json')))" 2>/dev/null || date +%s.%N)
    wait "$pid"
    local prc=$?
    local a d
    a=$(grep -o 'attached in [0-9]* ms' "$res/$name.attach.err" | grep -o '[0-9]*' || echo '?')
    d=$(grep -o 'detached in [0-9]* ms' "$res/$name.attach.err" | grep -o '[0-9]*' || echo '?')
    local line
    line=$(grep -n "$marker" "$work/$file" | head -n 1 | cut -d: -f1)
    # The report as printed names the line when the suspect's stack has it among its shown
    # frames; the whole stack (--frames 64) says whether it is there at all.
    "$cudaleak" report --growth --frames 64 "$(ls -d "$work/out-$name"/*/ | head -n 1)" \
        >"$res/$name.frames.txt" 2>&1
    local named=no
    if grep -q "$file:$line" "$res/$name.report.txt"; then
        named="yes ($file:$line)"
    elif grep -q "$file:$line" "$res/$name.frames.txt"; then
        named="in the whole stack ($file:$line)"
    fi
    local held
    held=$(grep -o 'held by [^:]*\[[a-z-]*\]' "$res/$name.report.txt" | head -n 1)
    local verdict
    verdict=$(grep '^SUMMARY' "$res/$name.report.txt" | tail -n 1)
    # While attached: from the end of the attach to the start of the detach.
    local t1 t2
    t1=$(python3 -c "print($t0 + ${a:-0}/1000)")
    t2=$(python3 -c "print($t3 - ${d:-0}/1000 - 1)")
    local phases
    phases=$(python3 "$work/phases.py" "$res/$name.program.log" "$t0" "$t1" "$t2" "$t3")
    local row="| $name (exit $prc, cudaleak $rc) | $a ms | $d ms | $verdict | ${held:-—} | $named | $phases |"
    echo "$row"
    rows+=("$row")
}

experiment static_leak slow_leak.cu "// LEAK" "$work/slow_leak"
experiment torch_leak train.py "# KEEP" python3 "$work/train.py" leak
experiment torch_clean train.py "# KEEP" python3 "$work/train.py" clean
# A job started with PyTorch's stream-ordered backend: every tensor is a driver allocation, so
# the kept tensor's own line is what grows (attach cannot change a running job's allocator).
experiment torch_leak_async train.py "# KEEP" \
    env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 "$work/train.py" leak

{
    header
    printf '%s\n' "${rows[@]}"
} >"$out/summary.md"
for name in static_leak torch_leak torch_clean torch_leak_async; do
    echo
    echo "## $name: cudaleak attach (stderr, then the report's suspects)"
    cat "$res/$name.attach.err"
    grep -A8 '^Suspect' "$res/$name.report.txt" | head -n 40
    tail -n 2 "$res/$name.program.log"
done
tar czf "$out/details.tar.gz" -C "$res" .
