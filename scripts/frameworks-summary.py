#!/usr/bin/env python3
"""frameworks-summary.py — what the frameworks said they held, dump by dump: each dump's
`frameworks` counters (framework/backend/device, last read, floor, blocks, reads since the
previous snapshot) and, where present, the records' largest groups with their innermost frames.
For a look at a run of `cudaleak run` on a GPU machine (docs/validation.md, issue 40).

    scripts/frameworks-summary.py RUN_DIR...
"""
import glob
import json
import os
import sys


def order(path):
    d = json.load(open(path))
    p = d["process"]
    return (p["pid"], p["end"] != "snapshot", p.get("snapshot") or 0)


for run in sys.argv[1:]:
    for f in sorted(glob.glob(os.path.join(run, "cudaleak.*.json")), key=order):
        d = json.load(open(f))
        fw = d.get("frameworks")
        if not fw:
            continue
        counts = "; ".join(
            "%s/%s/d%d bytes=%d floor=%d blocks=%s floor_blocks=%s reads=%d"
            % (c["framework"], c.get("backend"), c["device"], c["bytes"], c["floor_bytes"],
               c.get("blocks"), c.get("floor_blocks"), c["samples"])
            for c in fw["counters"]
        )
        ended = " ended" if fw.get("ended_unix_ms") else ""
        print(f"{os.path.basename(f)} {d['process']['end']}: {counts}{ended}")
        for r in fw.get("records", []):
            print(f"  record {r['framework']}: on at {r['since_unix_ms']}, read at {r['unix_ms']}, "
                  f"{len(r['groups'])} groups, note {r.get('note')}")
            for g in r["groups"][:4]:
                frames = [f"{os.path.basename(x.get('file') or '?')}:{x.get('line')}" for x in g["frames"][:6]]
                print(f"    {g['blocks']} blocks, {g['bytes']} B: {' < '.join(frames)}")
