"""Whole index folders: moving a damaged one aside, swapping in a rebuilt one.

A rebuild fills `<name>.new` and marks it complete just before the swap, so a crash at any
moment leaves either the old folder, or a complete new one that `recover` puts in place.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

COMPLETE_FILE = "seelen_complete"  # written into a rebuilt index just before its swap
STAGING = ".new"  # suffix of the folder a rebuild fills before the swap
# Damaged indexes moved aside and kept for inspection: enough to compare a few faults, few
# enough that a fault repeating at every start cannot fill the disk (each is rebuildable).
KEEP_DAMAGED = 3


def present(path: Path) -> bool:
    """True when anything (folder, file, dangling link) is at `path`."""
    return path.exists() or path.is_symlink()


def remove(path: Path) -> None:
    """Delete whatever is at `path`, if anything."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif present(path):
        path.unlink()


def staging_path(live: Path) -> Path:
    """Where a rebuild of `live` is built before the swap."""
    return live.with_name(live.name + STAGING)


def damaged(live: Path) -> list[Path]:
    """Damaged copies of `live` moved aside and kept, newest first."""
    return sorted(live.parent.glob(live.name + ".damaged-*"), reverse=True)


def move_aside(path: Path, label: str) -> Path | None:
    """Rename `path` to `<name>.<label>-<UTC time>`; keeps the newest `KEEP_DAMAGED`
    damaged copies. Returns the new path, or None when nothing was there."""
    if not present(path):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.with_name(f"{path.name}.{label}-{stamp}")
    n = 1
    while present(target):
        n += 1
        target = path.with_name(f"{path.name}.{label}-{stamp}-{n}")
    path.rename(target)
    for extra in damaged(path)[KEEP_DAMAGED:]:
        remove(extra)
    return target


def swap(live: Path, staged: Path, *, keep_old: bool) -> None:
    """Put the complete `staged` folder at `live`; the old one is kept as damaged or deleted."""
    (staged / COMPLETE_FILE).touch(mode=0o600)
    old = move_aside(live, "damaged" if keep_old else "old")
    staged.rename(live)  # the moment the new index takes over
    (live / COMPLETE_FILE).unlink()
    if old is not None and not keep_old:
        remove(old)


def recover(live: Path) -> bool:
    """After a crash: finish a swap whose old folder was already moved (True), or remove a
    rebuild that never completed. Old folders a crash left behind are removed too."""
    staged, finished = staging_path(live), False
    if present(staged):
        if (staged / COMPLETE_FILE).exists() and not present(live):
            staged.rename(live)
            (live / COMPLETE_FILE).unlink()
            finished = True
        else:
            remove(staged)
    if present(live):  # only once the new index is in place is the old one garbage
        for old in live.parent.glob(live.name + ".old-*"):
            remove(old)
    return finished
