"""ab_rounds: the in-process A/B of the Python GPU benchmarks (mlp.py, torch_alloc.py), as
tests/bench/gpu/ab.cu does it in C++: rounds alternating recording on and off through the shim's
cudaleak_set_recording, two untimed warm-up rounds first."""
import ctypes
import statistics
import sys


def alternate(rounds, round_fn):
    """Runs round_fn() (which returns its own measure) `rounds` times after two warm-up rounds,
    recording on and off in turn; returns the median measures (on, off)."""
    try:
        set_recording = ctypes.CDLL(None).cudaleak_set_recording
    except AttributeError:
        sys.exit(f"{sys.argv[0]}: the A/B needs the shim (LD_PRELOAD=libcudaleak.so)")
    on, off = [], []
    for r in range(-2, rounds):
        recording = r % 2 == 0
        set_recording(int(recording))
        v = round_fn()
        if r >= 0:
            (on if recording else off).append(v)
    set_recording(1)
    return statistics.median(on), statistics.median(off)
