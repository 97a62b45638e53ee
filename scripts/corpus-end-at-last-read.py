#!/usr/bin/env python3
"""corpus-end-at-last-read.py — copies a corpus run's dumps (SRC/MODE/NAME/out/run-*/, as
scripts/corpus-rejudge.sh reads them) to DEST with each process's `frameworks.ended_unix_ms`
moved to the moment of its last read. That is what the bootstrap writes since 10c6ce9 (the
counts end at the script's end, then PyTorch's record is read), where the bootstrap of
2026-12-07 04:14 UTC ended them only after reading the record (seconds later, with flat
snapshots in between). The counts themselves are untouched.

    scripts/corpus-end-at-last-read.py SRC DEST
"""
import glob
import json
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
moved = 0
for run in glob.glob(os.path.join(src, "*", "*", "out", "run-*")):
    out = os.path.join(dst, os.path.relpath(run, src))
    os.makedirs(out, exist_ok=True)
    files = glob.glob(os.path.join(run, "cudaleak.*.json"))
    last = {}
    dumps = []
    for f in files:
        d = json.load(open(f))
        dumps.append((f, d))
        fw = d.get("frameworks")
        if fw and fw.get("counters"):
            pid = d["process"]["pid"]
            last[pid] = max([c["unix_ms"] for c in fw["counters"]] + [last.get(pid, 0)])
    for f, d in dumps:
        fw = d.get("frameworks")
        if fw and fw.get("ended_unix_ms") and d["process"]["pid"] in last:
            fw["ended_unix_ms"] = last[d["process"]["pid"]]
            moved += 1
        with open(os.path.join(out, os.path.basename(f)), "w") as w:
            json.dump(d, w)
print(f"corpus-end-at-last-read: {moved} dumps' ends moved")
