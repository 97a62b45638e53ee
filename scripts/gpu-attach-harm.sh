#!/usr/bin/env bash
# scripts/gpu-attach-harm.sh — `cudaleak attach` never harms the job (issue 39), on a real GPU:
# each program below is attached to TIMES times (default 10), `--for 1s` each, while it runs; then
# it is told to finish and must exit 0 with its own consistency check passed.
#
#   scripts/gpu-attach-harm.sh [--bin-dir DIR]      (or CUDALEAK_BIN_DIR=DIR; as gpu-attach.sh)
#
#   1. host_churn (C++, nvcc's static runtime): two host threads in a loop of operator new/delete
#      and malloc/free with no system call, the main one also cudaMalloc/kernel/cudaFree every
#      256 rounds; a thread stopped inside malloc is the case that corrupted heaps before;
#   2. host_churn built with -cudart shared;
#   3. train.py: a PyTorch MLP training loop (default caching allocator) with a data thread that
#      builds Python objects.
# Per attach: whether it attached and detached (and how long each took), else the refusal. At the
# end the exit status and the program's last line. With $OUT set, harm.log and summary.md there.
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
TIMES="${TIMES:-10}"
out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-harm.XXXXXX")}"
work="$(mktemp -d "${TMPDIR:-/tmp}/cudaleak-harm-work.XXXXXX")"
mkdir -p "$out"
exec > >(tee -a "$out/harm.log") 2>&1
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
echo "# cudaleak attach, $TIMES times per job, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
echo "- nvcc: $("$nvcc" --version | grep -i release)"
echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -n 1)"
echo "- cudaleak: $("$cudaleak" --version) from $bin_dir"

cat >"$work/host_churn.cu" <<'EOF'
// host_churn: host threads in allocation-bound loops beside CUDA work; SIGUSR2 ends it.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
static volatile std::sig_atomic_t stop_now = 0;
__global__ void touch(float *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = p[i] * 0.5f + 1.0f;
}
static unsigned long churn(bool cuda) {
    std::vector<std::string *> held(128, nullptr);
    unsigned long round = 0, sum = 0;
    while (!stop_now) {
        unsigned i = (unsigned)(round * 2654435761u) % held.size();
        delete held[i];
        held[i] = new std::string(32 + round % 200, 'a' + round % 26);
        void *p = malloc(64 + (round % 113) * 40);
        memset(p, 1, 16);
        sum += ((unsigned char *)p)[3];
        free(p);
        if (cuda && round % 256 == 0) {
            float *d = nullptr;
            if (cudaMalloc(&d, 1 << 20) != cudaSuccess) { std::puts("cudaMalloc failed"); std::exit(3); }
            touch<<<256, 1024>>>(d, 1 << 18);
            if (cudaDeviceSynchronize() != cudaSuccess) { std::puts("kernel failed"); std::exit(4); }
            cudaFree(d);
        }
        round++;
    }
    for (auto *s : held) delete s;
    return sum + round;
}
int main() {
    std::signal(SIGUSR2, [](int) { stop_now = 1; });
    cudaFree(nullptr);
    std::printf("ready\n");
    std::fflush(stdout);
    unsigned long other = 0;
    std::thread t([&] { other = churn(false); });
    unsigned long mine = churn(true);
    t.join();
    std::printf("host_churn done: %lu %lu rounds, heap and GPU intact\n", mine, other);
    return 0;
}
EOF

cat >"$work/train.py" <<'EOF'
# train.py: an MLP training loop with a data thread; SIGUSR2 ends it.
import signal, threading, time, math
import torch
stop = threading.Event()
signal.signal(signal.SIGUSR2, lambda *_: stop.set())
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = []
def data():
    while not stop.is_set():
        batches.append({"x": [i * 0.5 for i in range(256)], "tag": "b" * 64})
        if len(batches) > 64:
            batches.pop(0)
        time.sleep(0.001)
threading.Thread(target=data, daemon=True).start()
print("ready", flush=True)
steps, loss = 0, None
while not stop.is_set():
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    steps += 1
value = loss.item()
print(f"train.py done: {steps} steps, loss {value:.4f}, {'finite' if math.isfinite(value) else 'NOT FINITE'}", flush=True)
EOF

"$nvcc" -O2 -g -o "$work/host_churn_static" "$work/host_churn.cu" || { echo "nvcc failed"; exit 1; }
"$nvcc" -O2 -g -cudart shared -o "$work/host_churn_shared" "$work/host_churn.cu" || { echo "nvcc failed"; exit 1; }

summary="$out/summary.md"
echo "| job | attached and detached | refused | attach ms (median) | detach ms (median) | exit | last line |" >"$summary"
echo "|---|---|---|---|---|---|---|" >>"$summary"

job() {
    local name="$1"; shift
    local log="$work/$name.log"
    "$@" >"$log" 2>&1 &
    local pid=$!
    for _ in $(seq 600); do grep -q '^ready' "$log" 2>/dev/null && break; sleep 0.1; done
    sleep 2
    local ok=0 refused=0 a_ms=() d_ms=()
    for i in $(seq "$TIMES"); do
        local err="$work/$name.attach$i.err"
        timeout 120 "$cudaleak" attach --for 1s --out "$work/out-$name" "$pid" >/dev/null 2>"$err"
        local a d
        a=$(grep -o 'attached in [0-9]* ms' "$err" | grep -o '[0-9]*')
        d=$(grep -o 'detached in [0-9]* ms' "$err" | grep -o '[0-9]*')
        if [[ -n "$a" && -n "$d" ]]; then
            ok=$((ok + 1)); a_ms+=("$a"); d_ms+=("$d")
        else
            refused=$((refused + 1))
            echo "$name attach $i: $(grep -m1 'cannot attach\|error\|could not' "$err")"
        fi
        kill -0 "$pid" 2>/dev/null || { echo "$name: DIED after attach $i"; break; }
        sleep 0.5
    done
    kill -USR2 "$pid" 2>/dev/null
    wait "$pid"
    local code=$?
    local med_a med_d
    med_a=$(printf '%s\n' "${a_ms[@]:-}" | sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "-")}')
    med_d=$(printf '%s\n' "${d_ms[@]:-}" | sort -n | awk '{v[NR]=$1} END {print (NR ? v[int((NR+1)/2)] : "-")}')
    local last
    last=$(tail -n 1 "$log")
    echo "$name: $ok of $TIMES attached and detached, $refused refused, exit $code: $last"
    echo "| $name | $ok of $TIMES | $refused | $med_a | $med_d | $code | $last |" >>"$summary"
}

job host_churn_static "$work/host_churn_static"
job host_churn_shared "$work/host_churn_shared"
job train_py python3 -u "$work/train.py"
echo
cat "$summary"
