#!/usr/bin/env bash
# scripts/screenshot.sh — renders the HTML report of some dumps to a PNG with headless Chromium,
# so the README's picture is made by a command, not drawn:
#
#   scripts/screenshot.sh DUMP_DIR_OR_FILES… OUT.png
#
# Runs `cudaleak report --format html` on the inputs (a run directory with
# snapshots gets the timeline; REPORT_ARGS adds options, e.g. REPORT_ARGS="--growth") and
# screenshots the page at WIDTH×HEIGHT (default 1280×2200) CSS pixels. HTML=FILE keeps the page
# there. CUDALEAK_BIN names the CLI (default target/release/cudaleak; run `make` first),
# CUDALEAK_CHROMIUM the browser (default chromium). Nothing is fetched: the browser starts with
# a fresh profile and its network features off. Writes only OUT.png (and HTML's FILE); its
# temporary directory is removed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ $# -lt 2 ]]; then
    echo "usage: scripts/screenshot.sh DUMP_DIR_OR_FILES… OUT.png" >&2
    exit 2
fi
out="${*: -1}"
inputs=("${@:1:$#-1}")
case "$out" in
    *.png) ;;
    *) echo "screenshot: the last argument must be the PNG to write, not '$out'" >&2; exit 2 ;;
esac
cudaleak="${CUDALEAK_BIN:-$repo/target/release/cudaleak}"
browser="${CUDALEAK_CHROMIUM:-chromium}"
if [[ ! -x "$cudaleak" ]]; then
    echo "screenshot: $cudaleak is missing; run 'make' first" >&2
    exit 2
fi
if ! command -v "$browser" >/dev/null; then
    echo "screenshot: no '$browser' (apt-get install -y chromium, or set CUDALEAK_CHROMIUM)" >&2
    exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
profile="$tmp/profile"
page="${HTML:-$tmp/report.html}"
# The page shows the gate's real verdict, so the gate stays on: 0 and 23 (clean, failed) are
# both fine here, 2 (unreadable input, bad options) is not.
status=0
# shellcheck disable=SC2086 # REPORT_ARGS is a list of options
"$cudaleak" report --format html ${REPORT_ARGS:-} -o "$page" "${inputs[@]}" || status=$?
if [[ $status -ne 0 && $status -ne 23 ]]; then
    echo "screenshot: cudaleak report exited $status" >&2
    exit 2
fi
abs_page="$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
rm -f "$out"
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" \
    --window-size="${WIDTH:-1280},${HEIGHT:-2200}" --screenshot="$out" "file://$abs_page" \
    >/dev/null 2>"$tmp/chromium.log" || {
    cat "$tmp/chromium.log" >&2
    echo "screenshot: chromium failed" >&2
    exit 1
}
if [[ ! -s "$out" ]]; then
    cat "$tmp/chromium.log" >&2
    echo "screenshot: chromium wrote no $out" >&2
    exit 1
fi
echo "screenshot: $out${HTML:+ (page: $HTML)}"
