"""A second, read-only connection for the direct word search, so it runs beside the rest.

A recall starts its searches together (memory/recall.py): the word search over the whole
memory (BM25 over up to COMMON_ROWS rows a word: the heaviest query a recall makes, 4-7 ms
of CPU for a chit-chat line at 100k turns), the summaries' word search, the sessions' word
counts, and, as they return, the summaries' rows and the searches inside sessions. On the
store's one connection they queue behind its lock; SQLite releases the GIL while it works,
so on a connection of its own the heavy search runs on the second core while the others run
on the first. Reads only: it sees what is committed, as any reader does (a write in progress
on the main connection is not waited for; the recall reads the memory as of its commit).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seelen.errors import StoreError
from seelen.store.faults import explain


class SecondReader:
    """A read-only connection to the store's file at `path`, opened at its first query. Where
    none can be opened (a store held in RAM, a file read as immutable in a folder that
    cannot be written), every query runs on the main connection (`fallback`), as before."""

    def __init__(
        self,
        path: Path,
        connect: Callable[..., sqlite3.Connection],
        fallback: Callable[..., list[Any]],
    ) -> None:
        self._path, self._connect, self._fallback = path, connect, fallback
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._usable = path.exists()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read query (a `StoreError` when SQLite fails)."""
        with self._lock:
            if self._usable and self._db is None:
                self._db = self._open()
            if self._db is None:
                return self._fallback(sql, params)
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(explain(exc, self._path)) from None

    def _open(self) -> sqlite3.Connection | None:
        try:
            db = self._connect(f"{self._path.resolve().as_uri()}?mode=ro", uri=True)
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return db
        except sqlite3.Error:
            self._usable = False
            return None

    def close(self) -> None:
        """Close the connection, if it was opened (a later query runs on the main one)."""
        with self._lock:
            self._usable = False
            if self._db is not None:
                self._db.close()
                self._db = None
