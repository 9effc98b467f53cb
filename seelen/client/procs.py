"""What Linux's `/proc/<pid>/stat` says about a process: its state, its parent, its CPU time.

One reader of that line for every caller: the owner's thin client (has the old owner ended?),
the tests (which servers did this process start?) and the benchmarks (the owner's CPU).
Standard library only, so the thin client can use it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """The fields of one `/proc/<pid>/stat` line that Seelen reads."""

    pid: int
    state: str  # R, S, D, Z (a zombie: ended, waiting for its parent), …
    ppid: int
    cpu_ticks: int  # user + system time, in clock ticks


def proc_stat(pid: int) -> ProcStat | None:
    """The process's stat line, or None when it does not exist (or cannot be read)."""
    try:
        line = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces and ")": split after the last one.
    fields = line.rsplit(")", 1)[-1].split()
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[11]) + int(fields[12]))


def gone(pid: int) -> bool:
    """True once process `pid` has ended (a zombie waiting for its parent has ended too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, but another user's
        return False
    stat = proc_stat(pid)
    if stat is None:  # it ended just now; or there is no /proc, and kill(0) said it lives
        return PROC.is_dir()
    return stat.state == "Z"


def children(parent: int) -> set[int]:
    """The live (not zombie) children of process `parent`."""
    found = set()
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and stat.ppid == parent and stat.state != "Z":
                found.add(stat.pid)
    return found


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far; 0 when it is gone."""
    stat = proc_stat(pid)
    return stat.cpu_ticks / TICKS if stat is not None else 0.0
