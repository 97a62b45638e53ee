"""Leak.line: the program's own line of a leak group, as the CLI's JSON lists its frames
(run by tests/tests/python_api.rs, with pytest from PyPI)."""

import sys

from cudaleak import Leak

LIBRARY = f"{sys.prefix}/lib/python3/site-packages/torch/nn/modules/module.py"


def frame(file, line, kind="native", function="f"):
    return {"file": file, "line": line, "kind": kind, "function": function}


def test_the_innermost_python_frame_outside_the_libraries():
    leak = Leak(
        {
            "frames": [
                frame("cuda_alloc.c", 12),
                frame(LIBRARY, 1500, "python"),
                frame("/home/me/train.py", 8, "python"),
                frame("/home/me/main.py", 30, "python"),
            ]
        }
    )
    assert leak.line == "/home/me/train.py:8"


def test_without_python_frames_the_innermost_frame_with_a_file():
    leak = Leak({"frames": [{"function": "??"}, frame("leak.c", 21), frame("main.c", 5)]})
    assert leak.line == "leak.c:21"


def test_a_library_frame_is_passed_over_and_taken_only_when_alone():
    leak = Leak({"frames": [frame(LIBRARY, 1500, "python"), frame("/x/y.py", 2, "python")]})
    assert leak.line == "/x/y.py:2"
    assert Leak({"frames": [frame(LIBRARY, 7, "python")]}).line == f"{LIBRARY}:7"


def test_no_frame_with_a_file_gives_none():
    assert Leak({"frames": [{"function": "??"}]}).line is None
    assert Leak({}).line is None
