"""The process's memory: the libraries' pages let go while idle, and read again on use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_IDLE_THEN_SEARCH = """
import sys
import numpy as np
from seelen.heap import page_out_files
from seelen.vectors import VectorIndex, VectorRow

def file_kib():
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1])

index = VectorIndex(sys.argv[1], "m", 4)
index.add("turns", [VectorRow("up", "s1", 0, np.ones(4)), VectorRow("down", "s1", 0, -np.ones(4))])
assert index.search("turns", np.ones(4), 1)[0].text_id == "up"
before = file_kib()
advised = page_out_files()
after = file_kib()
print(advised, before, after, index.search("turns", -np.ones(4), 1)[0].text_id)
"""


def test_an_idle_process_lets_its_libraries_pages_go_and_reads_them_again(tmp_path: Path) -> None:
    """LanceDB's code, loaded and used, leaves the resident set when advised, and the next
    search (which needs it again) still answers."""
    result = subprocess.run(
        [sys.executable, "-c", _IDLE_THEN_SEARCH, str(tmp_path / "lancedb")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    advised, before, after, hit = result.stdout.split()
    assert int(advised) > 0
    assert int(after) < int(before) // 2, (before, after)  # KiB of file pages resident
    assert hit == "down"


def test_a_starting_process_holds_its_collector_then_freezes_what_it_loaded() -> None:
    code = """
import gc, time
from seelen.heap import hold_collector
hold_collector(0.2)
held = not gc.isenabled()
import json, decimal  # loaded while held
time.sleep(0.6)  # thrice the hold: its timer has run, on a busy machine too
print(held, gc.isenabled(), gc.get_freeze_count() > 1000)
gc.disable()
hold_collector(0.05)  # a program that turned it off keeps it off
time.sleep(0.2)
print(gc.isenabled())
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True", "False"]
