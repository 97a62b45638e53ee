#!/usr/bin/env python3
"""corpus-table.py — scores a run of scripts/gpu-corpus.sh: a markdown table of the growth
verdict per corpus entry and mode, and its precision and recall. Reads only; never runs anything.

    scripts/corpus-table.py [--tsv corpus.tsv]... INPUT...

INPUT: a dumps-MODE.tar.xz the runner left (read in place), or a directory holding NAME/result.json
(an unpacked tarball, or the runner's work directory WORK/MODE); the mode is taken from the
tarball's name or the directory's. The expected verdict of each entry comes from the entry table
in scripts/gpu-corpus.sh, the leak's line from the `# LEAK` marker (a comment ending a line) in the
leaky driver the entry runs (tests/gpu/corpus/leak_*.py). --tsv adds the exit status and seconds.

Fields of the growth report (`cudaleak_growth` JSON, docs/report-format.md) relied on, all read
with defaults: top level `cudaleak_growth` (tells a growth report from an exit report, which
`run --growth` writes when no process left two dumps), `suspects`; `processes[].suspects`,
`processes[].callsites[]` with `suspect`, `growth_bytes`, `growth_allocations` and `frames[]`
with `file` and `line` (folded runs of frames, `{folded_frames, modules}`, have neither).

Scoring, per mode, at the level of programs: a leaky entry with a suspect is a true positive,
without one a false negative; a correct entry with a suspect is a false positive. Precision =
TP / (TP + FP), recall = TP / (TP + FN). Runs without a growth report (no result, bad JSON, an exit
report) are counted apart as "no result", in neither. Also counted: suspects in correct programs, and how many
true positives name the `# LEAK` line in their top suspect's stack (or in any suspect's).
"""
import argparse
import json
import os
import re
import sys
import tarfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"#\s*LEAK\s*$")


def corpus_entries():
    """name -> (expected, [(basename, line)] of the # LEAK markers in the drivers it runs)."""
    with open(os.path.join(REPO, "scripts", "gpu-corpus.sh")) as f:
        text = f.read()
    table = re.search(r"entries\(\) \{\n\s*cat <<'EOF'\n(.*?)\nEOF\n", text, re.S)
    if not table:
        sys.exit("corpus-table: no entry table in scripts/gpu-corpus.sh")
    entries = {}
    for row in table.group(1).splitlines():
        if not row.strip() or row.lstrip().startswith("#"):
            continue
        name, expected, _limit, _dir, *cmd = row.split()
        markers = []
        for arg in cmd:
            if arg.startswith("@T@/"):
                path = os.path.join(REPO, "tests", "gpu", "corpus", arg[4:])
                with open(path) as src:
                    markers += [(os.path.basename(path), n)
                                for n, line in enumerate(src, 1) if MARKER.search(line.rstrip())]
        entries[name] = (expected, markers)
    return entries


def read_results(inputs):
    """{(mode, name): parsed result json, or an error string}."""
    results = {}
    for path in inputs:
        base = os.path.basename(os.path.normpath(path))
        if os.path.isfile(path):
            m = re.match(r"dumps-(.+)\.tar(\.\w+)?$", base)
            mode = m.group(1) if m else base
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    parts = os.path.normpath(member.name).split(os.sep)
                    if len(parts) == 2 and parts[1] == "result.json" and member.isfile():
                        results[(mode, parts[0])] = parse(tar.extractfile(member).read())
        else:
            mode = base
            for name in sorted(os.listdir(path)):
                result = os.path.join(path, name, "result.json")
                if os.path.isfile(result):
                    with open(result, "rb") as f:
                        results[(mode, name)] = parse(f.read())
    return results


def parse(data):
    try:
        return json.loads(data)
    except ValueError as e:
        return f"bad json (line {e.lineno})" if hasattr(e, "lineno") else "bad json"


def read_tsv(paths):
    rows = {}
    for path in paths or []:
        with open(path) as f:
            header = f.readline().rstrip("\n").split("\t")
            for line in f:
                row = dict(zip(header, line.rstrip("\n").split("\t")))
                rows[(row.get("mode"), row.get("name"))] = row
    return rows


def human(n):
    if n is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def judge(report, markers):
    """(verdict, suspects, top growth, top hit, any hit) of one result."""
    if isinstance(report, str):
        return report, None, None, None, None
    if "cudaleak_growth" not in report:
        return "no series", None, None, None, None
    processes = report.get("processes") or []
    suspects_found = [c for p in processes for c in (p.get("callsites") or []) if c.get("suspect")]
    count = report.get("suspects")
    if not isinstance(count, int):
        count = sum(p.get("suspects") or 0 for p in processes) or len(suspects_found)
    if count == 0 or not suspects_found:
        return "ok", count, None, None, None
    suspects_found.sort(key=lambda c: c.get("growth_bytes") or 0, reverse=True)

    def hits(callsite):
        return any((os.path.basename(fr.get("file") or ""), fr.get("line")) in markers
                   for fr in callsite.get("frames") or [] if isinstance(fr, dict))

    top = suspects_found[0]
    return ("leak", count, top.get("growth_bytes"),
            hits(top) if markers else None, any(map(hits, suspects_found)) if markers else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsv", action="append",
                    help="a corpus.tsv of the runner (adds exit status and seconds); repeatable")
    ap.add_argument("inputs", nargs="+", help="dumps-MODE.tar.xz files or MODE directories")
    args = ap.parse_args()
    entries = corpus_entries()
    results = read_results(args.inputs)
    tsv = read_tsv(args.tsv)
    modes = sorted({mode for mode, _ in results}, key=lambda m: (m != "default", m))

    yn = {True: "yes", False: "**no**", None: "–"}
    print("| entry | mode | expected | verdict | suspects | top growth | `# LEAK` in top | in any | exit | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {}
    for mode in modes:
        t = totals.setdefault(mode, dict(tp=0, fp=0, fn=0, tn=0, fp_suspects=0, top_hit=0,
                                          any_hit=0, unscored=0))
        for name, (expected, markers) in entries.items():
            if (mode, name) not in results:
                if (mode, name) in tsv:
                    results[(mode, name)] = "missing"
                else:
                    continue
            verdict, count, growth, top_hit, any_hit = judge(results[(mode, name)], set(markers))
            flagged = verdict == "leak"
            if verdict not in ("leak", "ok"):
                t["unscored"] += 1
            elif expected == "leak":
                t["tp" if flagged else "fn"] += 1
                t["top_hit"] += bool(top_hit)
                t["any_hit"] += bool(any_hit)
            else:
                t["fp" if flagged else "tn"] += 1
                t["fp_suspects"] += count or 0
            wrong = verdict not in ("leak", "ok") or flagged != (expected == "leak")
            row = tsv.get((mode, name), {})
            print(f"| {name} | {mode} | {expected} | {'**' + verdict + '**' if wrong else verdict} "
                  f"| {'–' if count is None else count} | {human(growth) if flagged else '–'} "
                  f"| {yn[top_hit] if flagged else '–'} | {yn[any_hit] if flagged else '–'} "
                  f"| {row.get('exit', '–')} | {row.get('seconds', '–')} |")
    print()
    print("| mode | TP | FP (programs) | FN | TN | suspects in correct programs | precision | recall "
          "| TP naming `# LEAK` (top / any) | no result |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in modes:
        t = totals[mode]
        precision = t["tp"] / (t["tp"] + t["fp"]) if t["tp"] + t["fp"] else float("nan")
        recall = t["tp"] / (t["tp"] + t["fn"]) if t["tp"] + t["fn"] else float("nan")
        print(f"| {mode} | {t['tp']} | {t['fp']} | {t['fn']} | {t['tn']} | {t['fp_suspects']} "
              f"| {precision:.2f} | {recall:.2f} | {t['top_hit']} / {t['any_hit']} | {t['unscored']} |")
    unknown = sorted({name for _, name in results} - set(entries))
    if unknown:
        print(f"\nNot in the entry table (ignored): {', '.join(unknown)}")


if __name__ == "__main__":
    main()
