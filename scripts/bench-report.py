#!/usr/bin/env python3
"""Peak memory (max RSS) and time of `cudaleak report` in every format, `report --growth` and
`diff`, on generated dumps of N live blocks from N distinct stacks (scripts/gen-dump.py).

Prints a Markdown table with each command's peak RSS and its ratio to the size of the largest
dump it reads (the target is at most 2x). Asserts nothing; numbers go to docs/performance.md.

  scripts/bench-report.py [--blocks 100000] [--depth 8] [--cudaleak target/release/cudaleak]
  scripts/bench-report.py --blocks 100000 --depth 3 --distinct-frames
  scripts/bench-report.py --shim [--blocks 20000]

With --distinct-frames no two stacks share a frame (gen-dump.py --distinct-frames): every frame
is its own, so nothing the CLI interns is shared and each frame costs what it costs alone.

With --shim the dump is the shim's own, of tests/bench/distinct_stacks.c (N blocks from N
distinct stacks, built with cc and run under target/release/libcudaleak.so on the null-device
runtime): unnamed frames, named by the CLI from the program's modules as a real run's are; only
`report` in each format is measured.

Dumps are written once into target/bench-dumps/ and reused.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate(path, n, depth, snapshot=None, distinct=False):
    if os.path.exists(path):
        return
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "gen-dump.py"), str(n),
           "--depth", str(depth), "-o", path + ".part"]
    if distinct:
        cmd.append("--distinct-frames")
    if snapshot:
        cmd += ["--snapshot", str(snapshot)]
    subprocess.run(cmd, check=True)
    os.rename(path + ".part", path)


def shim_dump(n):
    """The shim's dump of distinct_stacks N (built and run once; reused)."""
    d = os.path.join(ROOT, "target", "bench-dumps", "shim-n%d" % n)
    done = os.path.join(d, "out")
    if not os.path.isdir(done):
        os.makedirs(d, exist_ok=True)
        release = os.path.join(ROOT, "target", "release")
        null = subprocess.run([os.path.join(release, "nullcuda-dir")], check=True,
                              stdout=subprocess.PIPE, text=True).stdout.strip()
        exe = os.path.join(d, "distinct_stacks")
        subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer",
                        "-fno-optimize-sibling-calls",
                        "-I", os.path.join(ROOT, "tests", "nullcuda", "include"),
                        os.path.join(ROOT, "tests", "bench", "distinct_stacks.c"),
                        "-L", null, "-lcudart", "-o", exe], check=True)
        env = dict(os.environ, LD_LIBRARY_PATH=null, CUDALEAK_QUIET="1",
                   CUDALEAK_OUTPUT=done + ".part/",
                   LD_PRELOAD=os.path.join(release, "libcudaleak.so"))
        subprocess.run([exe, str(n)], check=True, env=env)
        os.rename(done + ".part", done)
    return os.path.join(done, os.listdir(done)[0])


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
    ap.add_argument("--distinct-frames", action="store_true",
                    help="no two stacks share a frame (gen-dump.py --distinct-frames)")
    ap.add_argument("--shim", action="store_true",
                    help="measure on the shim's dump of tests/bench/distinct_stacks.c")
    a = ap.parse_args()
    if a.shim:
        return measure_shim_dump(a)
    d = os.path.join(ROOT, "target", "bench-dumps", "n%d-d%d%s" % (
        a.blocks, a.depth, "-distinct" if a.distinct_frames else ""))
    series = os.path.join(d, "series")
    os.makedirs(series, exist_ok=True)
    final = os.path.join(series, "cudaleak.7001.json")
    snap = os.path.join(series, "cudaleak.7001.snapshot-1.json")
    generate(final, a.blocks, a.depth, distinct=a.distinct_frames)
    generate(snap, a.blocks // 2, a.depth, snapshot=1, distinct=a.distinct_frames)
    size = os.path.getsize(final)
    mib = 1 << 20
    print("%d live blocks from distinct stacks%s, depth %d: dump %.1f MiB (snapshot %.1f MiB)\n"
          % (a.blocks, " sharing no frame" if a.distinct_frames else "", a.depth, size / mib,
             os.path.getsize(snap) / mib))
    print("| command | exit | time | peak RSS | RSS / dump |")
    print("|---|---:|---:|---:|---:|")
    runs = [("report --format %s" % f, ["report", "--format", f, final])
            for f in ("text", "json", "markdown", "sarif", "html", "folded")]
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


def measure_shim_dump(a):
    dump = shim_dump(a.blocks)
    size = os.path.getsize(dump)
    mib = 1 << 20
    print("the shim's dump of distinct_stacks %d (%d distinct stacks): %.1f MiB\n"
          % (a.blocks, a.blocks, size / mib))
    print("| command | exit | time | peak RSS | RSS / dump |")
    print("|---|---:|---:|---:|---:|")
    for f in ("text", "json", "markdown", "sarif", "html", "folded"):
        label = "report --format %s" % f
        if any(t in label for t in a.skip):
            continue
        code, secs, rss, err = measure([a.cudaleak, "report", "--format", f, dump])
        if code not in (0, 23):
            print("%s failed (exit %d): %s" % (label, code, err.strip()), file=sys.stderr)
        print("| `%s` | %d | %.1f s | %.0f MiB | %.2f× |" % (label, code, secs, rss / mib, rss / size))


if __name__ == "__main__":
    main()
