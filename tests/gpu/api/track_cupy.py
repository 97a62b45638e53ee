"""cudaleak.track() with CuPy on a GPU: arrays kept every step are shown at the `# LEAK` line
(CuPy's pool is emptied at the block's end, so what it still holds is kept by objects); the
same loop without keeping shows nothing. Prints one JSON object."""
import json

import cupy as cp

import cudaleak

a = cp.ones((1024, 1024), dtype=cp.float32)  # before: never blamed
kept = []
with cudaleak.track(snapshot_every=None) as t:
    for i in range(50):
        b = a * i  # LEAK
        kept.append(b)
out = {"cupy": cp.__version__}
out["leak"] = [{"bytes": g.bytes, "allocations": g.allocations, "api": g.api,
                "line": g.line} for g in t.leaks]
out["leak_report"] = t.report()
with cudaleak.track(snapshot_every=None) as t:
    for i in range(50):
        b = a * i
        float(b.sum())
    del b  # the last one would be kept by the name
out["clean"] = [{"bytes": g.bytes, "line": g.line} for g in t.leaks]
out["clean_report"] = t.report()
print(json.dumps(out, indent=1))
