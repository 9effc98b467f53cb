"""SQLite's faults as one clear line each: a full disk, a read-only or empty file, damage.

The store raises these as `StoreError`, so no user ever sees `internal error: …` for them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from seelen.errors import StoreError

# SQLite's messages for faults of the disk or the file, as one line a user can act on.
_EXPLAIN = (
    ("disk is full", "the disk is full: nothing was saved to {path}; free some space"),
    ("readonly", "{path} is read-only: Seelen cannot save to it"),
    ("disk i/o error", "cannot read or write {path} (disk I/O error: a full or failing disk?)"),
    ("locked", "{path} is busy: another process holds it; try again"),
    ("not a database", "{path} is not a Seelen memory (not an SQLite database)"),
    # `db repair` mends the index and orphan rows, never a damaged file: a backup does.
    (
        "malformed",
        "{path} is damaged ({error}); `seelen db restore` puts back the newest backup, "
        "keeping this one (`seelen db list` shows them)",
    ),
)


def explain(exc: sqlite3.Error, path: Path) -> str:
    """One line for an SQLite error on the memory file."""
    text = str(exc)
    for needle, line in _EXPLAIN:
        if needle in text.lower():
            return line.format(path=path, error=text)
    return f"cannot use {path}: {text}"


def refuse_empty_file(path: Path) -> None:
    """An empty memory file is damage, not a new memory: SQLite would silently start afresh."""
    try:
        empty = path.stat().st_size == 0
        wal = path.with_name(path.name + "-wal")
        if empty and not (wal.exists() and wal.stat().st_size > 0):
            raise StoreError(
                f"{path} is empty (0 bytes), so it holds no memory; restore it from a backup, "
                "or move it away to start a new memory"
            )
    except FileNotFoundError:
        pass
