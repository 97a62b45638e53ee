"""The package reads and writes sizes as the CLI does (cudaleak/_sizes.py against
format/src/size.rs): every size is given to `cudaleak report --min-bytes S --format json` (the CLI
from CUDALEAK_CLI) and the bytes it read compared; a size one refuses, the other refuses."""

import json
import os
import subprocess

import pytest

from cudaleak import _sizes

CLEAN = os.path.join(os.path.dirname(__file__), "../../cli/tests/fixtures/clean.json")
SIZES = [
    "0", "4096", "4K", "4k", "4KB", "4 KB", "4KiB", "1.5M", "1.5 MB", "2G", "2 GiB", "1T",
    " 7 b ", "0.5K", "1023.6", "0.5", "2.5", "MB", "4 MiBs", "-1", "1..2K", "4 XB", "",
]


def cli_reads(size):
    got = subprocess.run(
        [os.environ["CUDALEAK_CLI"], "report", "--format", "json", "--min-bytes", size, CLEAN],
        capture_output=True,
        text=True,
    )
    if got.returncode == 2:
        return None  # refused
    return json.loads(got.stdout)["suppressed"]["min_bytes"]


@pytest.mark.parametrize("size", SIZES)
def test_the_package_reads_a_size_as_the_cli_does(size):
    try:
        ours = _sizes.parse_size(size)
    except ValueError:
        ours = None
    assert ours == cli_reads(size)


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1048575, "1.00 MiB"), (75878, "74.10 KiB")],
)
def test_sizes_are_written_as_the_cli_writes_them(n, text):
    assert _sizes.human(n) == text
