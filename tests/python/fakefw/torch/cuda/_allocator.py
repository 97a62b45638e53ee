"""The fake's caching allocator: live tensors by key, counted per device, the frames of those
made while the record is on, and reserved memory that only grows (in 2 MiB segments)."""

import os
import traceback

DEVICES = int(os.environ.get("FAKE_TORCH_DEVICES", "2"))
SEGMENT = 2 << 20
# Where the fake's blocks are said to be (one address per tensor, never reused).
BASE = 0x7F00_0000_0000

initialized = False
recording = False
_live = {}  # key -> (device, nbytes, frames)
_next_key = 0
_allocated = [0] * DEVICES
_count = [0] * DEVICES
_reserved = [0] * DEVICES


def lazy_init():
    global initialized
    initialized = True


def alloc(nbytes, device, caller):
    global _next_key
    lazy_init()
    frames = []
    if recording:
        stack = traceback.extract_stack(caller)  # outermost first
        frames = [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in stack]
        if os.environ.get("FAKE_TORCH_FRAMES") != "outermost_first":
            frames.reverse()  # as PyTorch lists them
    _next_key += 1
    _live[_next_key] = (device, nbytes, frames)
    _allocated[device] += nbytes
    _count[device] += 1
    need = -(-_allocated[device] // SEGMENT) * SEGMENT
    _reserved[device] = max(_reserved[device], need)
    return _next_key


def free(key):
    device, nbytes, _ = _live.pop(key)
    _allocated[device] -= nbytes
    _count[device] -= 1


def nested_stats(device):
    if not 0 <= device < DEVICES:
        raise RuntimeError("Invalid device argument %d" % device)

    def stat(v):
        return {"all": {"current": v, "peak": v}, "small_pool": {"current": 0}}

    return {
        "allocated_bytes": stat(_allocated[device]),
        "allocation": stat(_count[device]),
        "active_bytes": stat(_allocated[device]),
        "reserved_bytes": stat(_reserved[device]),
        "num_alloc_retries": 0,
    }


def record_history(on):
    if os.environ.get("FAKE_TORCH_HISTORY") == "fail":
        raise RuntimeError("the fake's record is broken on purpose")
    global recording
    recording = on


def snapshot():
    """Live tensors as active blocks (each at an address of its own), with a freed (inactive) block per device that carries
    frames too: a reader must keep only the active ones."""
    segments = {d: [] for d in range(DEVICES)}
    for key, (device, nbytes, frames) in list(_live.items()):
        block = {"size": nbytes, "requested_size": nbytes, "state": "active_allocated"}
        block["address"] = BASE + key * 512
        block["frames"] = frames
        segments[device].append(block)
    here = [{"filename": __file__, "line": 1, "name": "freed"}]
    for d in segments:
        segments[d].append({"size": 1 << 20, "state": "inactive", "frames": here})
    segments = [
        {"device": d, "address": BASE + (d << 40), "blocks": b} for d, b in segments.items()
    ]
    return {"segments": segments, "device_traces": []}
