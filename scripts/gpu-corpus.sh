#!/usr/bin/env bash
# scripts/gpu-corpus.sh — issue 22's corpus: real programs under `cudaleak run --growth`, exactly
# as a user runs them, to measure the growth verdict's precision and recall. Correct programs
# (pytorch/examples run unmodified, and tests/gpu/corpus/ok_*.py) must get no growth suspect;
# every leaky loop (tests/gpu/corpus/leak_*.py, one bug each, marked `# LEAK`) must get one.
# This script only runs and records; scripts/corpus-table.py scores the results.
#
#   CUDALEAK_BIN_DIR=DIR CORPUS=DEST [MODES="default exact"] [BUDGET_S=470] [JOBS=1] \
#       scripts/gpu-corpus.sh [NAME...]
#
# DIR holds cudaleak and libcudaleak.so; DEST is what scripts/corpus-prep.sh DEST made (the
# examples and a fake MNIST: the GPU machine has no network). NAMEs pick entries (default: all).
# exact mode adds --exact-pools. Entries that would start after BUDGET_S seconds are skipped (and
# listed), so that one call of the device tool (9 minutes) always ends with its results packed:
# run MODES=default and MODES=exact as two calls, or JOBS=4 (runs at a time, sharing the GPU:
# an H200 has room for four, and the verdicts do not depend on speed). TAR_LIMIT_BYTES (default 15 MiB) caps each
# tarball.
#
# Each run happens in its own scratch directory under a mktemp directory (outputs such as
# checkpoints and images stay there). With $OUT set, leaves in $OUT: corpus.tsv (one line per
# run), corpus.log (everything printed) and dumps-MODE.tar.xz (each run's RESULT json and its
# --out directory, as NAME/result.json and NAME/out/run-*/).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin_dir="$(cd "${CUDALEAK_BIN_DIR:-$repo/target/release}" && pwd)"   # absolute: runs cd away
cudaleak="$bin_dir/cudaleak"
corpus="$(cd "${CORPUS:?CORPUS=DEST (made by scripts/corpus-prep.sh DEST)}" && pwd)"
budget="${BUDGET_S:-470}"
jobs="${JOBS:-1}"
drivers="$repo/tests/gpu/corpus"
work="$(mktemp -d)"
out="${OUT:-$work}"
tar_limit="${TAR_LIMIT_BYTES:-$((15 * 1024 * 1024))}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NCCL_NVLS_ENABLE=0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 MPLBACKEND=Agg
# Runs share the GPU when JOBS > 1: JAX's default pool takes 75 % of it, so each JAX run gets 15 %
# (its pool is still one preallocated region; the growth verdict sees it the same way).
((jobs > 1)) && export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.15}"

# The corpus. LIMIT: seconds before `timeout -s INT` stops the run (a safety net). DIR: a folder
# of $CORPUS/examples copied in as the working directory, or - for an empty one; either way
# ../data and ./data (unless the example has its own) lead to $CORPUS/data. @T@ stands for
# tests/gpu/corpus. Correct and leaky entries alternate, so a budget cut leaves a mix.
#
# Arguments, so that each run takes some 10-25 s on an H200 (startup, imports and CUDA init
# about 5 s; estimates, not measured):
#   mnist, mnist_rnn, vae, siamese: the fake MNIST is 6000/1000 images, so an epoch is 94 (vae:
#     47) small steps plus a DataLoader worker's start, well under a second (siamese: two
#     resnet18s a step, about 1.5 s); 12/12/15/5 epochs. vae saves two PNGs every epoch.
#   dcgan: FakeData holds 1000 64x64 images, 16 steps an epoch; 20 epochs, each saving two
#     checkpoints and a PNG of samples.
#   wlm_lstm, wlm_transformer: train.txt is test.txt (245k tokens, 351 batches of 20x35), and
#     each epoch evaluates valid.txt (620 batches) and saves model.pt; 4 epochs. --lr 5 for the
#     Transformer as its README says (the default lr 20 is the LSTM's; should the Transformer
#     diverge with it, the example would die in math.exp of its loss).
#   imagenet: resnet18 on the 1024+256-image ImageFolder of corpus-prep.sh, 16 steps of 64 an
#     epoch plus validation and a 90 MB checkpoint (and model_best copy); 5 epochs. (--dummy
#     cannot end in time: its FakeData epoch is 1.28M images.)
#   mnist_ff: forward-forward on all 6000 images at once, --epochs iterations per layer (two
#     layers) of well under a millisecond; 10000.
#   ddp_torchrun: torchrun with one process, NCCL, 64 tiny steps an epoch and a snapshot every
#     20 epochs; 120 epochs.
#   time_sequence_prediction and regression are left out: they run on the CPU only.
#   ok_numba_loop.py is left out: numba-cuda on the H200 image fails inside numba (numpy 2 has no
#   np.row_stack), before any loop of ours runs; it is kept for a machine where numba works.
#   Our drivers run for argv[1] seconds: 10 for the correct ones, 9-10 for the leaky ones.
entries() {
    cat <<'EOF'
# name              expect limit dir                              command
mnist               ok    90  mnist                               python3 main.py --epochs 12
leak_eval_no_grad   leak  90  -                                   python3 @T@/leak_eval_no_grad.py 9
dcgan               ok    90  dcgan                               python3 main.py --dataset fake --niter 20 --accel
leak_losses_append  leak  90  -                                   python3 @T@/leak_losses_append.py 9
wlm_lstm            ok    90  word_language_model                 python3 main.py --accel --epochs 4 --model LSTM
leak_lstm_hidden    leak  90  -                                   python3 @T@/leak_lstm_hidden.py 9
ok_gpt2_varlen      ok    90  -                                   python3 @T@/ok_gpt2_varlen.py 10
leak_cache_dict     leak  90  -                                   python3 @T@/leak_cache_dict.py 9
imagenet            ok    90  imagenet                            python3 main.py -a resnet18 --epochs 5 -b 64 -j 8 ../data/imagenet-sample
leak_closure        leak  90  -                                   python3 @T@/leak_closure.py 9
ok_resnet_infer     ok    90  -                                   python3 @T@/ok_resnet_infer_varbatch.py 10
leak_after_warmup   leak  90  -                                   python3 @T@/leak_after_warmup.py 10
vae                 ok    90  vae                                 python3 main.py --epochs 15
leak_slow           leak  90  -                                   python3 @T@/leak_slow.py 10
ok_jax_varbatch     ok    90  -                                   python3 @T@/ok_jax_varbatch.py 10
leak_cupy           leak  90  -                                   python3 @T@/leak_cupy.py 9
ok_cupy_loop        ok    90  -                                   python3 @T@/ok_cupy_loop.py 10
leak_jax            leak  90  -                                   python3 @T@/leak_jax.py 9
wlm_transformer     ok    90  word_language_model                 python3 main.py --accel --epochs 4 --model Transformer --lr 5
siamese             ok    90  siamese_network                     python3 main.py --epochs 5
ok_checkpoint       ok    90  -                                   python3 @T@/ok_checkpoint_epochs.py 10
mnist_rnn           ok    90  mnist_rnn                           python3 main.py --accel --epochs 12
mnist_ff            ok    90  mnist_forward_forward               python3 main.py --epochs 10000 --train_size 6000 --test_size 1000 --log-interval 500
ddp_torchrun        ok    90  distributed/ddp-tutorial-series     python3 -m torch.distributed.run --standalone --nproc_per_node=1 multigpu_torchrun.py 120 20
EOF
}

# summarize RESULT: "SUSPECTS<TAB>FRAME" from a growth report (cudaleak_growth JSON, see
# docs/report-format.md): suspects = the top-level count; FRAME = basename:line of the first frame
# of the top suspect that has a file outside site-packages/dist-packages and the Python library.
# "no-series" when the run wrote the exit report instead (no process left two dumps).
summarize() {
    python3 - "$1" <<'PY'
import json, os, re, sys
try:
    with open(sys.argv[1]) as f:
        report = json.load(f)
except (OSError, ValueError) as e:
    print(f"-\tno-result({type(e).__name__})")
    sys.exit()
if "cudaleak_growth" not in report:
    print("-\tno-series")
    sys.exit()
library = re.compile(r"(site|dist)-packages/|/lib/python3\.\d+/|^<")
frame = "-"
for process in report.get("processes", []):
    top = next((c for c in process.get("callsites", []) if c.get("suspect")), None)
    if top is None:
        continue
    for fr in top.get("frames", []):
        path, line = fr.get("file"), fr.get("line")
        if path and line and not library.search(path):
            frame = f"{os.path.basename(path)}:{line}"
            break
    break
print(f"{report.get('suspects', '-')}\t{frame}")
PY
}

# pack MODE: $out/dumps-MODE.tar.xz of every NAME/result.json and NAME/out of that mode. Over
# 15 MiB, it drops that mode's largest snapshot files (in practice exact mode's, whose dumps list
# every tensor) until what is left should fit at the ratio xz reached, logs each file dropped,
# and packs again (xz -9 is slow: as few passes as possible).
pack() {
    local mode="$1" dir="$work/$mode" tarball="$out/dumps-$mode.tar.xz" size raw target bytes path
    [[ -d "$dir" ]] || return 0
    for pass in 1 2 3 4; do
        (cd "$dir" && find . -mindepth 2 -maxdepth 2 \( -name result.json -o -name out \) -print0 \
            | sort -z | tar --null -T - -cf - | xz -9 -T0 --block-size=16MiB) > "$tarball"
        size=$(stat -c %s "$tarball")
        ((size <= tar_limit)) && break
        raw=$(find "$dir" -type f \( -path "$dir/*/out/*" -o -path "$dir/*/result.json" \) \
            -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
        target=$((raw * tar_limit / size * 85 / 100))
        echo "pack: $tarball is $size bytes (over $tar_limit; pass $pass): dropping the largest snapshots until $raw bytes are down to $target"
        while read -r bytes path; do
            ((raw <= target)) && break
            echo "pack: dropped $bytes bytes: ${path#"$dir"/}"
            rm -f "$path"
            raw=$((raw - bytes))
        done < <(find "$dir" -path '*/out/*' -name '*.snapshot-*.json' -printf '%s %p\n' | sort -rn)
    done
    echo "pack: $tarball $(stat -c %s "$tarball") bytes"
}

exec > >(tee "$out/corpus.log") 2>&1
tee_pid=$!
echo "date: $(date -u +%FT%TZ)  modes: ${MODES:-default exact}  budget: ${budget}s  corpus: $corpus"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
"$cudaleak" --version
[[ -x "$cudaleak" ]] || { echo "no cudaleak in $bin_dir"; exit 2; }

declare -A wanted=()
for name in "$@"; do
    entries | grep -q "^$name " || { echo "gpu-corpus: no entry named $name"; exit 2; }
    wanted[$name]=1
done
tsv="$out/corpus.tsv"
[[ -s "$tsv" ]] || printf 'name\tmode\texpected\texit\tseconds\tstopped\tsuspects\ttop_frame\n' > "$tsv"

# run_entry MODE NAME EXPECTED LIMIT DIR CMDLINE: one run; its output goes to $d/log and its tsv
# line to $d/line, both printed in corpus order once every run has ended.
run_entry() {
    local mode="$1" name="$2" expected="$3" limit="$4" dir="$5" cmdline="$6" flags=() cmd
    [[ "$mode" == exact ]] && flags=(--exact-pools)
    read -r -a cmd <<< "${cmdline//@T@/$drivers}"
    local d="$work/$mode/$name"
    mkdir -p "$d/run"
    ln -s "$corpus/data" "$d/data"        # the examples' '../data'
    [[ "$dir" == - ]] || cp -r "$corpus/examples/$dir/." "$d/run/"
    [[ -e "$d/run/data" ]] || ln -s "$corpus/data" "$d/run/data"   # and './data/'
    {
        echo "== $name ($mode, expected $expected): ${cmd[*]}"
        local t0 t1 ms rc stopped=no suspects frame
        t0=$(date +%s%N)
        (cd "$d/run" && timeout --foreground -k 20 -s INT "$limit" \
            "$cudaleak" run --growth "${flags[@]}" --format json -o "$d/result.json" \
            --out "$d/out" -- "${cmd[@]}" < /dev/null)
        rc=$?
        t1=$(date +%s%N)
        ms=$(((t1 - t0) / 1000000))
        ((ms >= limit * 1000)) && stopped=yes
        IFS=$'\t' read -r suspects frame < <(summarize "$d/result.json")
        printf '%s\t%s\t%s\t%s\t%d.%03d\t%s\t%s\t%s\n' "$name" "$mode" "$expected" "$rc" \
            $((ms / 1000)) $((ms % 1000)) "$stopped" "$suspects" "$frame" > "$d/line"
        cat "$d/line"
        echo "dumps: $(find "$d/out" -name 'cudaleak.*.json' 2> /dev/null | wc -l), result: $d/result.json"
    } > "$d/log" 2>&1
    rm -rf "$d/run"   # checkpoints and images: only the dumps are kept
}

t_start=$SECONDS
skipped=()
started=()
pids=()
# Entry by entry, each in every mode, up to JOBS at a time.
while read -r name expected limit dir cmdline; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    ((${#wanted[@]} == 0)) || [[ -n "${wanted[$name]:-}" ]] || continue
    for mode in ${MODES:-default exact}; do
        if ((SECONDS - t_start > budget)); then skipped+=("$name/$mode"); continue; fi
        while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
        echo "start $name/$mode at $((SECONDS - t_start)) s"
        run_entry "$mode" "$name" "$expected" "$limit" "$dir" "$cmdline" &
        pids+=($!)
        started+=("$mode/$name")
    done
done < <(entries)
# (a bare `wait` would also wait for the log's tee, which ends only when this script does)
((${#pids[@]} == 0)) || wait "${pids[@]}"
for run in "${started[@]}"; do
    cat "$work/$run/log"
    cat "$work/$run/line" >> "$tsv" 2> /dev/null
done
((${#skipped[@]} == 0)) || echo "skipped (over the ${budget}s budget): ${skipped[*]}"

for mode in ${MODES:-default exact}; do pack "$mode"; done
echo "done in $((SECONDS - t_start)) s; work directory $work"
exec >&- 2>&-
wait "$tee_pid"   # corpus.log complete before the device tool collects $OUT
