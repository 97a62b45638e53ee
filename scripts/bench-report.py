#!/usr/bin/env python3
"""Peak memory (max RSS) and time of `cudaleak report` in every format, `report --growth` and
`diff`, on generated dumps of N live blocks from N distinct stacks (scripts/gen-dump.py).

Prints a Markdown table with each command's peak RSS and its ratio to the size of the largest
dump it reads (the target is at most 2x). Asserts nothing; numbers go to docs/performance.md.

  scripts/bench-report.py [--blocks 100000] [--depth 8] [--cudaleak target/release/cudaleak]

Dumps are written once into target/bench-dumps/ and reused.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate(path, n, depth, snapshot=None):
    if os.path.exists(path):
        return
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "gen-dump.py"), str(n),
           "--depth", str(depth), "-o", path + ".part"]
    if snapshot:
        cmd += ["--snapshot", str(snapshot)]
    subprocess.run(cmd, check=True)
    os.rename(path + ".part", path)


def measure(cmd):
    """Runs cmd with stdout to /dev/null; returns (exit status, seconds, max RSS in bytes)."""
    start = time.monotonic()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.monotonic() - start, usage.ru_maxrss * 1024, err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=100000)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--cudaleak", default=os.path.join(ROOT, "target", "release", "cudaleak"))
    ap.add_argument("--skip", action="append", default=[], metavar="TEXT",
                    help="skip the commands whose label contains TEXT (e.g. sarif, for a build "
                         "whose SARIF report would not fit in memory)")
    a = ap.parse_args()
    d = os.path.join(ROOT, "target", "bench-dumps", "n%d-d%d" % (a.blocks, a.depth))
    series = os.path.join(d, "series")
    os.makedirs(series, exist_ok=True)
    final = os.path.join(series, "cudaleak.7001.json")
    snap = os.path.join(series, "cudaleak.7001.snapshot-1.json")
    generate(final, a.blocks, a.depth)
    generate(snap, a.blocks // 2, a.depth, snapshot=1)
    size = os.path.getsize(final)
    mib = 1 << 20
    print("%d live blocks from distinct stacks, depth %d: dump %.1f MiB (snapshot %.1f MiB)\n"
          % (a.blocks, a.depth, size / mib, os.path.getsize(snap) / mib))
    print("| command | exit | time | peak RSS | RSS / dump |")
    print("|---|---:|---:|---:|---:|")
    runs = [("report --format %s" % f, ["report", "--format", f, final])
            for f in ("text", "json", "markdown", "sarif")]
    runs += [("report --growth", ["report", "--growth", series]),
             ("report --growth --format sarif", ["report", "--growth", "--format", "sarif", series]),
             ("diff", ["diff", snap, final]),
             ("diff --format json", ["diff", "--format", "json", snap, final])]
    for label, args in runs:
        if any(t in label for t in a.skip):
            continue
        code, secs, rss, err = measure([a.cudaleak] + args)
        if code not in (0, 23):
            print("%s failed (exit %d): %s" % (label, code, err.strip()), file=sys.stderr)
        print("| `%s` | %d | %.1f s | %.0f MiB | %.2f× |" % (label, code, secs, rss / mib, rss / size))


if __name__ == "__main__":
    main()
