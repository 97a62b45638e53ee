"""Sizes as the CLI reads and writes them (format/src/size.rs: `parse_size`, `human_bytes`),
for what Python must judge itself (the pytest plugin's peak limit) or print beside the CLI's own
words. python/tests/test_sizes.py holds the two to the same answers."""

import math
import re

# Every unit is binary: `MB` as pytest-memray reads it, the same as `MiB`.
UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


def parse_size(text):
    """`"1 MB"` -> 1048576; a whole number of bytes as it is. ValueError when it is no size."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in UNITS:
        raise ValueError(
            f"{text!r} is not a size (a number, and B, K, M, G, T, KB, MB, GB, TB, KiB, MiB, "
            "GiB or TiB: all binary)"
        )
    num, mult = m.group(1), UNITS[m.group(2).lower()]
    if re.fullmatch(r"[0-9]+", num):
        return int(num) * mult
    try:
        value = float(num)
    except ValueError:
        raise ValueError(f"{text!r} is not a size") from None
    return math.floor(value * mult + 0.5)  # half away from zero, as Rust's round()


def human(n):
    """Bytes as the CLI writes them: `4.00 MiB`, one unit up where two decimals would read
    1024.00."""
    if n < 1024:
        return f"{n} B"
    value, units = n / 1024, ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    while len(units) > 1 and value >= 1023.995:
        value /= 1024
        units.pop(0)
    return f"{value:.2f} {units[0]}"
