"""BEGIN IMMEDIATE … COMMIT under the store's lock, with SQLite's errors as one line."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from seelen.errors import StoreError
from seelen.store.faults import explain


class Transaction:
    """BEGIN IMMEDIATE … COMMIT under the store's lock; ROLLBACK on any error.

    SQLite's own errors leave as a `StoreError` with one clear line (disk full, read-only…).
    """

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock, path: Path) -> None:
        self._db, self._lock, self._path = db, lock, path

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(explain(exc, self._path)) from None
            raise
        return self._db

    def __exit__(self, exc_type: object, exc: BaseException | None, _tb: object) -> None:
        try:
            if exc_type is None:
                self._db.execute("COMMIT")
            elif self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error as error:
            exc = exc or error
        finally:
            self._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise StoreError(explain(exc, self._path)) from None
