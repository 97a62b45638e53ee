#!/usr/bin/env python3
"""growth-fixture.py — turns the dumps of one real `cudaleak run --growth` (a run directory of
scripts/gpu-corpus.sh, say) into a compact series fixture for CI (cli/tests/growth_corpus.rs),
and back.

    scripts/growth-fixture.py pack RUN_DIR FIXTURE.json --about TEXT --suspects N [--line F:L]
    scripts/growth-fixture.py unpack FIXTURE.json DIR [--root CHECKOUT]

pack keeps the process with the most dumps. What the growth verdict reads is kept exactly:
each dump's process, summary, floors and finalizing record, and per stack the number and total
size of its live blocks (with their API, kind, device and thread). What it does not read is
folded: the stack table, written once for the whole series instead of once per dump (indices
renumbered) as lists of indices into one table of distinct frames, the blocks of one stack and API merged into one line `[stack, api, kind, device,
thread, count, bytes]`, and a frame's `ip` dropped where its module offset is known (unpack puts the offset there). unpack
writes the dumps back (blocks split evenly; addresses, sequence numbers and times made up),
as the Rust test does; `pack` checks that `cudaleak report --growth` says the same of both
(suspects, and each callsite's growth and verdict) before writing (CUDALEAK=PATH, default
target/release/cudaleak).

--suspects and --line are what the fixture's test expects: the number of growth suspects and
the `file:line` (basename) the top suspect's stack must name outside the Python library.

The fixture records the checkout the program ran from (`root`, --root at pack, this checkout by
default); unpack --root CHECKOUT moves the frames' files under it to CHECKOUT, so a report read
from another clone names them relative to its own root, as it would have on the GPU machine.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Blocks merged into groups: those with only these fields, of these kinds. Others (a VMM
# reservation or mapping, say) are kept as they are.
PLAIN_BLOCK = {"address", "size", "api", "kind", "device", "thread", "seq", "time_ms", "stack"}
PLAIN_KINDS = {"device", "async", "host", "managed"}


def frame_key(frame):
    f = dict(frame)
    if f.get("offset") is not None:
        f.pop("ip", None)
    return f


def pack(run_dir):
    files = sorted(glob.glob(os.path.join(run_dir, "cudaleak.*.json")))
    by_pid = collections.defaultdict(list)
    for f in files:
        by_pid[os.path.basename(f).split(".")[1]].append(f)
    if not by_pid:
        sys.exit(f"growth-fixture: no dumps in {run_dir}")
    pid = max(by_pid, key=lambda p: len(by_pid[p]))
    stacks, index, dumps = [], {}, []
    frames, frame_index = [], {}

    def frame_id(fr):
        key = json.dumps(fr, sort_keys=True)
        if key not in frame_index:
            frame_index[key] = len(frames)
            frames.append(fr)
        return frame_index[key]

    for path in by_pid[pid]:
        with open(path) as f:
            d = json.load(f)
        remap = []
        for s in d["stacks"]:
            ids = [frame_id(frame_key(fr)) for fr in s["frames"]]
            key = tuple(ids)
            if key not in index:
                index[key] = len(stacks)
                stacks.append(ids)
            remap.append(index[key])
        groups, verbatim = collections.OrderedDict(), []
        for b in d["live"]:
            if set(b) != PLAIN_BLOCK or b["kind"] not in PLAIN_KINDS:
                verbatim.append(dict(b, stack=remap[b["stack"]]))
                continue
            k = (remap[b["stack"]], b["api"], b["kind"], b["device"], b["thread"])
            count, size = groups.get(k, (0, 0))
            groups[k] = (count + 1, size + b["size"])
        out = {k: v for k, v in d.items() if k not in ("stacks", "live", "events")}
        out["live"] = verbatim
        out["live_groups"] = [list(k) + [c, s] for k, (c, s) in groups.items()]
        if d.get("floors") is not None:
            out["floors"] = [dict(e, stack=remap[e["stack"]]) for e in d["floors"]]
        fin = d.get("finalizing")
        if fin is not None:
            fin = dict(fin)
            for key in ("held", "floors"):
                if fin.get(key) is not None:
                    fin[key] = [dict(e, stack=remap[e["stack"]]) for e in fin[key]]
            out["finalizing"] = fin
        dumps.append((os.path.basename(path), out))
    return {"frames": frames, "stacks": stacks,
            "dumps": [{"file": n, "dump": d} for n, d in dumps]}


def moved(frame, old_root, new_root):
    f = frame.get("file")
    if new_root is None or not old_root or not f or not f.startswith(old_root.rstrip("/") + "/"):
        return frame
    return dict(frame, file=os.path.join(new_root, f[len(old_root.rstrip("/")) + 1:]))


def unpack(fixture, dest, root=None):
    os.makedirs(dest, exist_ok=True)
    for entry in fixture["dumps"]:
        d = dict(entry["dump"])
        live, seq = list(d.pop("live")), 0
        for stack, api, kind, device, thread, count, size in d.pop("live_groups"):
            for i in range(count):
                seq += 1
                live.append({  # (seq made up above any real one: unique, never compared)
                    "address": hex(0x7000_0000_0000 + seq * 0x1_0000_0000),  # none real
                    "size": size // count + (size % count if i == 0 else 0),
                    "api": api, "kind": kind, "device": device, "thread": thread,
                    "seq": 1_000_000_000 + seq, "time_ms": 0, "stack": stack,
                })
        frames = [moved(dict(fr, ip=fr.get("ip", fr.get("offset"))), fixture.get("root"), root)
                  for fr in fixture["frames"]]
        d["stacks"] = [{"frames": [frames[i] for i in st]} for st in fixture["stacks"]]
        d["live"] = live
        d["events"] = []
        live.sort(key=lambda b: b["seq"])
        with open(os.path.join(dest, entry["file"]), "w") as f:
            json.dump(d, f)


def verdicts(cudaleak, paths):
    out = subprocess.run([cudaleak, "report", "--growth", "--format", "json", *paths],
                         capture_output=True, text=True)
    if not out.stdout:
        sys.exit(f"growth-fixture: cudaleak report failed: {out.stderr.strip()}")
    report = json.loads(out.stdout)
    rows = []
    for p in report["processes"]:
        for c in p["callsites"]:
            rows.append((c["suspect"], c["not_suspect"], c["growth_bytes"],
                         c["growth_allocations"], c.get("held_by")))
    return report["suspects"], sorted(rows, key=repr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("run_dir")
    p.add_argument("fixture")
    p.add_argument("--about", required=True, help="where the dumps come from")
    p.add_argument("--suspects", type=int, required=True)
    p.add_argument("--line", help="file:line the top suspect names")
    p.add_argument("--root", default=REPO, help="the checkout the program ran from")
    u = sub.add_parser("unpack")
    u.add_argument("fixture")
    u.add_argument("dest")
    u.add_argument("--root", help="move the frames' files under the fixture's root here")
    a = ap.parse_args()
    if a.cmd == "unpack":
        with open(a.fixture) as f:
            unpack(json.load(f), a.dest, a.root)
        return
    fixture = {"about": a.about, "expect": {"suspects": a.suspects, "line": a.line},
               "root": os.path.abspath(a.root)}
    fixture.update(pack(a.run_dir))
    cudaleak = os.environ.get("CUDALEAK", os.path.join(REPO, "target/release/cudaleak"))
    with tempfile.TemporaryDirectory() as tmp:
        unpack(fixture, tmp)
        pid = fixture["dumps"][0]["file"].split(".")[1]
        before = verdicts(cudaleak, sorted(glob.glob(os.path.join(a.run_dir, f"cudaleak.{pid}.*"))))
        after = verdicts(cudaleak, sorted(glob.glob(os.path.join(tmp, "*.json"))))
    if before != after:
        sys.exit(f"growth-fixture: the packed series is judged differently:\n{before}\n{after}")
    if before[0] != a.suspects:
        sys.exit(f"growth-fixture: the run has {before[0]} suspects, not {a.suspects}")
    with open(a.fixture, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print(f"{a.fixture}: {len(fixture['dumps'])} dumps, {len(fixture['stacks'])} stacks, "
          f"{os.path.getsize(a.fixture)} bytes; {before[0]} suspects, {len(before[1])} rows")


if __name__ == "__main__":
    main()
