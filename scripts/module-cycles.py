#!/usr/bin/env python3
"""Print the cycles among a crate's top-level modules; exit 1 when there is one.

usage: scripts/module-cycles.py CRATE_SRC_DIR... [--graph]

A module's edges are the top-level modules its files name through `crate::X` (in `use`
lines and in paths written inline) and through `super::` chains that climb to the crate
root. `lib.rs` and `main.rs` are the root and take part in no cycle. `#[cfg(test)]` files
(tests.rs, *_test.rs, tests/ folders) are left out: tests may reach anywhere.
"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
# `use crate::{a, b::c}` groups: the names right after `crate::{` or `, ` inside one.
GROUP = re.compile(r"\bcrate::\{([^;]*)\}", re.S)


def module_of(rel):
    """The top-level module a file belongs to, or None for the crate root."""
    parts = rel[:-3].split(os.sep)
    if parts == ["lib"] or parts == ["main"]:
        return None
    return parts[0] if parts[0] != "mod" else None


def is_test_file(rel):
    name = os.path.basename(rel)
    parts = rel.split(os.sep)
    return name == "tests.rs" or name.endswith("_test.rs") or "tests" in parts[:-1]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def strip_test_modules(text):
    """Drop `#[cfg(test)] mod x { ... }` bodies (brace-matched)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def edges(src):
    graph = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)
            if is_test_file(rel):
                continue
            me = module_of(rel)
            if me is None:
                continue
            # A file's own module path: `a/b.rs` and `a/b/mod.rs` are both a::b.
            own = rel[:-3].split(os.sep)
            if own[-1] == "mod":
                own = own[:-1]
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = strip_test_modules(strip_comments(fh.read()))
            targets = set()
            for kind, rest in PATH.findall(text):
                names = rest.split("::")[1:]
                if kind == "crate":
                    targets.add(names[0])
                    continue
                # super::super::x — climb from the file's module.
                up = 1
                while names and names[0] == "super":
                    up += 1
                    names = names[1:]
                base = own[: max(len(own) - up, 0)]
                if not base and names:
                    targets.add(names[0])
            for group in GROUP.findall(text):
                for item in group.split(","):
                    item = item.strip()
                    if item and item != "self":
                        targets.add(re.split(r"::|\s|\{", item)[0])
            graph.setdefault(me, set()).update(t for t in targets if t != me)
    return graph


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    failed = False
    for src in (a for a in sys.argv[1:] if not a.startswith("--")):
        graph = edges(src)
        if "--graph" in sys.argv:
            for m in sorted(graph):
                print(f"{src}: {m} -> {', '.join(sorted(t for t in graph[m] if t in graph))}")
        for comp in cycles(graph):
            failed = True
            members = set(comp)
            print(f"{src}: cycle among {len(comp)} modules: {', '.join(comp)}")
            for m in comp:
                inside = sorted(t for t in graph[m] if t in members)
                print(f"  {m} -> {', '.join(inside)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
