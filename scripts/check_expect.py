#!/usr/bin/env python3
"""check_expect.py — the one checker of a sample's `EXPECT:` lines against a cudaleak dump.

    scripts/check_expect.py [--flavour shared|static|python] SOURCE DUMP_OR_DIR

SOURCE is the sample file holding the `// EXPECT:` (or `# EXPECT:`) lines; DUMP_OR_DIR is one
dump (cudaleak.<pid>.json) or a directory searched recursively for exactly one. The syntax is
documented in cuda-samples/README.md. Prints one line per check, then a last line
`SUMMARY<TAB>expected<TAB>seen<TAB>PASS|FAIL` for tables. Exit status: 0 every statement holds,
1 some does not, 2 the expectation or the dump cannot be read.

Used by tests/tests/samples.rs (null-device runtime) and scripts/gpu-validate.sh (real GPU);
it must stay standard-library only and never guess: an unknown key or an ambiguous marker is an
error, not a pass.
"""

import argparse
import json
import os
import re
import sys

SUMMARY_KEYS = {
    "allocations", "frees", "untracked_frees", "failed_allocations", "invalid_frees",
    "live_allocations", "live_bytes", "peak_live_bytes", "bytes_allocated",
}
LEAK_KEYS = {
    "marker", "file", "size", "count", "bytes", "api", "kind", "function",
    "module", "threads",
}
EVENT_KEYS = {
    "type", "marker", "file", "size", "count", "api", "function", "module",
    "error", "alloc_marker", "alloc_file",
}
INT_KEYS = SUMMARY_KEYS | {"size", "count", "bytes", "threads", "error"}
EXPECT_RE = re.compile(r"^\s*(?://|#)\s*EXPECT:\s*(.*?)\s*$")


class BadInput(Exception):
    """The expectation or the dump is unusable: exit 2."""


def parse_expectations(source):
    """[(kind, {key: value}, line_number)] from SOURCE's EXPECT lines."""
    statements = []
    with open(source, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = EXPECT_RE.match(line)
            if not m:
                continue
            words = m.group(1).split()
            if not words:
                raise BadInput(f"{source}:{n}: empty EXPECT line")
            kind, fields = words[0], {}
            allowed = {"summary": SUMMARY_KEYS, "leak": LEAK_KEYS, "event": EVENT_KEYS}.get(kind)
            if allowed is None:
                raise BadInput(f"{source}:{n}: unknown statement {kind!r} (summary, leak, event)")
            for w in words[1:]:
                key, eq, value = w.partition("=")
                if not eq or not value:
                    raise BadInput(f"{source}:{n}: {w!r} is not key=value")
                if key not in allowed:
                    raise BadInput(f"{source}:{n}: unknown key {key!r} for {kind}")
                if key in fields:
                    raise BadInput(f"{source}:{n}: {key!r} given twice")
                if key in INT_KEYS:
                    try:
                        value = int(value, 0)
                    except ValueError:
                        raise BadInput(f"{source}:{n}: {key}={value!r} is not an integer") from None
                fields[key] = value
            if kind in ("leak", "event") and "count" not in fields:
                raise BadInput(f"{source}:{n}: a {kind} statement needs count=")
            if kind == "event" and "type" not in fields:
                raise BadInput(f"{source}:{n}: an event statement needs type=")
            if kind == "leak" and not ({"marker", "size"} & fields.keys()):
                raise BadInput(f"{source}:{n}: a leak statement needs marker= or size=")
            statements.append((kind, fields, n))
    if not statements:
        raise BadInput(f"{source}: no EXPECT lines")
    return statements


def marker_line(path, marker):
    """The one line of `path` that ends in the comment `// MARKER` (or `# MARKER`)."""
    pattern = re.compile(r"(?://|#)\s*" + re.escape(marker) + r"\s*$")
    try:
        with open(path, encoding="utf-8") as f:
            hits = [n for n, line in enumerate(f, 1)
                    if pattern.search(line) and not EXPECT_RE.match(line)]
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    if len(hits) != 1:
        raise BadInput(f"{path}: marker {marker} found on {len(hits)} lines (need exactly 1)")
    return hits[0]


def find_dump(path):
    """The dump to check: `path` itself, or the one dump under directory `path` whose process
    made CUDA memory calls. Dumps of processes that made none (ldconfig started by Python's
    ctypes, a `timeout` wrapper) are ignored, and said so."""
    if os.path.isfile(path):
        return path
    found = []
    for root, _, files in os.walk(path):
        found += [os.path.join(root, f) for f in files
                  if f.startswith("cudaleak.") and f.endswith(".json")]
    active = []
    for f in sorted(found):
        d = load_dump(f)
        s = d["summary"]
        if s["allocations"] or s["frees"] or s["failed_allocations"] or s["invalid_frees"] \
                or s.get("untracked_frees") or d["events"]:
            active.append(f)
        else:
            print(f"note: ignoring {f} ({d['process']['exe']}: no CUDA memory calls)")
    if len(active) != 1:
        raise BadInput(f"{path}: {len(active)} dumps with CUDA memory calls found (need exactly 1):"
                       f" {active}")
    return active[0]


def load_dump(path):
    try:
        with open(path, encoding="utf-8") as f:
            dump = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}") from None
    if not isinstance(dump, dict) or dump.get("cudaleak_dump") not in (1, 2, 3, 4):
        raise BadInput(f"{path}: not a cudaleak dump of version 1 to 4")
    if dump.get("unnamed"):
        raise BadInput(f"{path}: its frames are not named yet: run `cudaleak symbolize` on it first")
    return dump


def base_function(name):
    """`process_data(float*)` -> `process_data`; `ns::f(int) const` -> `ns::f`."""
    return (name or "").split("(", 1)[0].strip()


def function_matches(name, expected):
    base = base_function(name)
    return base == expected or base.endswith("::" + expected)


def located_frame(stack, filename):
    """The innermost frame in `filename` (by base name): the allocating line in the sample,
    below any CUDA header or runtime frames."""
    for frame in stack["frames"]:
        if frame.get("file") and os.path.basename(frame["file"]) == filename:
            return frame
    return None


def frame_text(frame):
    if frame is None:
        return "no frame in that file"
    where = f"{os.path.basename(frame.get('file') or '?')}:{frame.get('line')}"
    return f"{frame.get('function')} at {where} ({os.path.basename(frame.get('module') or '?')})"


class Checker:
    def __init__(self, source, dump, flavour):
        self.source, self.dump, self.flavour = source, dump, flavour
        self.sdir = os.path.dirname(os.path.abspath(source))
        self.stacks = dump["stacks"]
        self.failures = 0

    def report(self, ok, what, expected, seen):
        if not ok:
            self.failures += 1
        print(f"{'ok  ' if ok else 'FAIL'} {what}: expected {expected}, seen {seen}")

    def user_frame(self, stack):
        """For messages: the innermost frame in one of the sample's own files, else the
        innermost frame with a file at all."""
        own = set(os.listdir(self.sdir))
        frames = [f for f in stack["frames"] if f.get("file")]
        return next((f for f in frames if os.path.basename(f["file"]) in own),
                    frames[0] if frames else None)

    def expected_api(self, fields):
        # Both flavours: a static runtime's record is named by the runtime function in its stack.
        return fields.get("api")

    def select(self, items, fields, n, stack_key):
        """Items of the dump (live records or events) this statement is about, each with its
        located frame (None when the statement names no marker)."""
        filename = None
        line = None
        if "marker" in fields:
            fpath = os.path.join(self.sdir, fields.get("file", os.path.basename(self.source)))
            filename = os.path.basename(fpath)
            line = marker_line(fpath, fields["marker"])
        chosen = []
        for item in items:
            if "size" in fields and item.get("size") != fields["size"]:
                continue
            frame = located_frame(self.stacks[item[stack_key]], filename) if filename else None
            if filename and (frame is None or frame.get("line") != line):
                continue
            chosen.append((item, frame))
        return chosen, filename, line

    def check_common(self, label, fields, chosen):
        items = [i for i, _ in chosen]
        self.report(len(items) == fields["count"], f"{label} count", fields["count"], len(items))
        api = self.expected_api(fields)
        if api is not None:
            seen = sorted({i["api"] for i in items})
            self.report(seen == [api] or not items and fields["count"] == 0, f"{label} api", api,
                        ",".join(seen) or "-")
        if "function" in fields:
            seen = sorted({base_function(f.get("function")) if f else "?" for _, f in chosen})
            ok = bool(chosen) and all(f and function_matches(f.get("function"), fields["function"])
                     for _, f in chosen)
            self.report(ok, f"{label} function", fields["function"], ",".join(seen) or "-")
        if "module" in fields:
            want = fields["module"]

            def has_module(item, frame):
                # A Python frame has no module: the module is then anywhere in the stack.
                located = frame and frame.get("module")
                frames = [frame] if located else self.stacks[item.get("stack", 0)]["frames"]
                return any(os.path.basename(fr.get("module") or "") == want for fr in frames)

            seen = sorted({os.path.basename((f or {}).get("module") or "?") for _, f in chosen})
            ok = bool(chosen) and all(has_module(i, f) for i, f in chosen)
            self.report(ok, f"{label} module", want, ",".join(seen) or "-")

    def check_leak(self, fields, n):
        chosen, filename, line = self.select(self.dump["live"], fields, n, "stack")
        label = f"leak at {filename}:{line}" if filename else f"leak of size {fields.get('size')}"
        self.check_common(label, fields, chosen)
        items = [i for i, _ in chosen]
        if "bytes" in fields:
            self.report(sum(i["size"] for i in items) == fields["bytes"], f"{label} bytes",
                        fields["bytes"], sum(i["size"] for i in items))
        if "kind" in fields:
            seen = sorted({i["kind"] for i in items})
            self.report(seen == [fields["kind"]] or not items and fields["count"] == 0, f"{label} kind", fields["kind"],
                        ",".join(seen) or "-")
        if "threads" in fields:
            seen = len({i["thread"] for i in items})
            self.report(seen == fields["threads"], f"{label} threads", fields["threads"], seen)
        return {id(i) for i in items}

    def check_event(self, fields, n):
        typed = [e for e in self.dump["events"] if e["type"] == fields["type"]]
        chosen, filename, line = self.select(typed, fields, n, "stack")
        where = f" at {filename}:{line}" if filename else ""
        label = f"{fields['type']}{where}"
        self.check_common(label, fields, chosen)
        items = [e for e, _ in chosen]
        if "error" in fields:
            seen = sorted({str(e.get("error")) for e in items})
            self.report(seen == [str(fields["error"])], f"{label} error", fields["error"],
                        ",".join(seen) or "-")
        if "alloc_marker" in fields:
            fpath = os.path.join(self.sdir, fields.get("alloc_file", os.path.basename(self.source)))
            aline = marker_line(fpath, fields["alloc_marker"])
            fname = os.path.basename(fpath)
            seen = []
            for e in items:
                st = e.get("alloc_stack")
                frame = located_frame(self.stacks[st], fname) if st is not None else None
                seen.append(frame.get("line") if frame else None)
            ok = bool(items) and all(s == aline for s in seen)
            self.report(ok, f"{label} allocated at", f"{fname}:{aline}",
                        ",".join(f"{fname}:{s}" if s else "unknown" for s in seen) or "-")
        return {id(e) for e in items}

    def run(self, statements):
        claimed_live, claimed_events = set(), set()
        for kind, fields, n in statements:
            if kind == "summary":
                for key, want in fields.items():
                    seen = self.dump["summary"].get(key)
                    self.report(seen == want, f"summary.{key}", want, seen)
            elif kind == "leak":
                claimed_live |= self.check_leak(fields, n)
            else:
                claimed_events |= self.check_event(fields, n)
        for r in self.dump["live"]:
            if id(r) not in claimed_live:
                top = self.user_frame(self.stacks[r["stack"]])
                self.report(False, "unexpected live allocation", "none",
                            f"{r['size']} B via {r['api']} ({r['kind']}), {frame_text(top)}")
        for e in self.dump["events"]:
            if id(e) not in claimed_events:
                top = self.user_frame(self.stacks[e["stack"]])
                self.report(False, "unexpected event", "none",
                            f"{e['type']} via {e['api']}, {frame_text(top)}")


def short(summary_fields, leaks, events):
    live = summary_fields.get("live_allocations", sum(f["count"] for f in leaks))
    text = f"live={live}"
    if "live_bytes" in summary_fields:
        text += f"/{summary_fields['live_bytes']}B"
    elif all("bytes" in f for f in leaks):
        text += f"/{sum(f['bytes'] for f in leaks)}B"
    counts = {}
    for f in events:
        counts[f["type"]] = counts.get(f["type"], 0) + f["count"]
    for t in sorted(counts):
        text += f" {t}={counts[t]}"
    return text


def seen_short(dump):
    s = dump["summary"]
    text = f"live={s['live_allocations']}/{s['live_bytes']}B"
    counts = {}
    for e in dump["events"]:
        counts[e["type"]] = counts.get(e["type"], 0) + 1
    for t in sorted(counts):
        text += f" {t}={counts[t]}"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flavour", choices=["shared", "static", "python"], default="shared")
    ap.add_argument("source")
    ap.add_argument("dump")
    args = ap.parse_args()
    try:
        statements = parse_expectations(args.source)
    except BadInput as e:
        print(f"error: {e}")
        print("SUMMARY\t?\t?\tFAIL")
        return 2
    summary = {}
    for kind, fields, _ in statements:
        if kind == "summary":
            summary.update(fields)
    expected = short(summary, [f for k, f, _ in statements if k == "leak"],
                     [f for k, f, _ in statements if k == "event"])
    try:
        path = find_dump(args.dump)
        dump = load_dump(path)
        print(f"checking {args.source} ({args.flavour}) against {path}")
        checker = Checker(args.source, dump, args.flavour)
        checker.run(statements)
    except BadInput as e:
        print(f"error: {e}")
        print(f"SUMMARY\t{expected}\tno usable dump\tFAIL")
        return 2
    except (KeyError, TypeError, IndexError) as e:
        print(f"error: malformed dump: {e!r}")
        print(f"SUMMARY\t{expected}\tmalformed dump\tFAIL")
        return 2
    verdict = "PASS" if checker.failures == 0 else "FAIL"
    print(f"SUMMARY\t{expected}\t{seen_short(dump)}\t{verdict}")
    return 0 if checker.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
