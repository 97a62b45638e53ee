#!/usr/bin/env bash
# scripts/corpus-rejudge.sh — judges the dumps of a corpus run again with this checkout's CLI:
# for each MODE/NAME/out of an unpacked dumps-MODE.tar.xz (scripts/gpu-corpus.sh), writes
# DEST/MODE/NAME/result.json as `run --growth` would have (`report --growth --format json` over
# the run's directory), for scripts/corpus-table.py to score. Needs no GPU.
#
#   scripts/corpus-rejudge.sh SRC DEST     (SRC holds default/ and exact/, each NAME/out/run-*/)
#   CUDALEAK=PATH overrides target/release/cudaleak.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cudaleak="${CUDALEAK:-$repo/target/release/cudaleak}"
src="${1:?usage: scripts/corpus-rejudge.sh SRC DEST}"
dest="${2:?usage: scripts/corpus-rejudge.sh SRC DEST}"
for out in "$src"/*/*/out; do
    name_dir="${out%/out}"
    name="$(basename "$name_dir")"
    mode="$(basename "$(dirname "$name_dir")")"
    mkdir -p "$dest/$mode/$name"
    # Exit 23 (suspects) and 2 (no usable series) are verdicts here, not failures.
    "$cudaleak" report --growth --format json -o "$dest/$mode/$name/result.json" "$out"/run-* \
        2> "$dest/$mode/$name/stderr" || true
done
