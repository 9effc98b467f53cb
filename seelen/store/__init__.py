"""SQLite: sessions, turns, summaries and their queries. The source of truth for every text.

Timestamps are integer milliseconds since the epoch; `seq` keeps the order of turns that share a
millisecond. Every write commits before it returns, so a crash loses nothing a caller was told is
saved. Threads share one connection behind a lock; the direct word search reads on a second one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from seelen.errors import StoreError
from seelen.store.archive import Archiving
from seelen.store.faults import explain, refuse_empty_file
from seelen.store.queries import COMMON_ROWS, Imports, IndexBookkeeping, Lookups, TextSearch
from seelen.store.records import (
    ACTIVE,
    ARCHIVED,
    EPHEMERAL,
    RECOUNT_TURNS,
    SPOKEN_ROLES,
    Session,
    Summary,
    Turn,
    drop_forgotten_words,
    new_id,
    now_ms,
    scrub_quotes,
    turn_row,
)
from seelen.store.schema import MIGRATIONS, index_text
from seelen.store.sessions import SessionReads
from seelen.store.transaction import Transaction
from seelen.store.wholes import SessionWords

__all__ = [
    "ACTIVE",
    "ARCHIVED",
    "EPHEMERAL",
    "SPOKEN_ROLES",
    "OutdatedStore",
    "Session",
    "Store",
    "Summary",
    "Turn",
    "new_id",
    "now_ms",
]


class OutdatedStore(StoreError):
    """A reader found a memory file that an older Seelen wrote: only a writer migrates it."""


class Store(Lookups, SessionReads, TextSearch, SessionWords, IndexBookkeeping, Imports, Archiving):
    """The SQLite memory store of one profile.

    `read_only=True` (a reader): the file is opened with `mode=ro`, so every write fails
    with a `StoreError`; a missing file reads as an empty memory held in RAM, so a reader
    creates nothing; a file that misses migrations raises `OutdatedStore`.
    """

    def __init__(
        self, path: Path, *, read_only: bool = False, common_rows: int = COMMON_ROWS
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.common_rows = common_rows  # see queries.COMMON_ROWS
        self._lock = threading.RLock()
        try:
            if read_only:
                self._db = self._open_read_only()
                return
            if not self.path.exists():
                self._create()
            refuse_empty_file(self.path)
            self._db = self._connect(self.path)
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from None

    @staticmethod
    def _connect(path: Path | str, *, uri: bool = False) -> sqlite3.Connection:
        db = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=10, uri=uri
        )
        db.row_factory = sqlite3.Row
        # The word-index triggers call it: every connection that writes text needs it.
        db.create_function("seelen_words", 1, index_text, deterministic=True)
        if not uri:  # a read-only connection can set nothing (the file is in WAL mode)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA secure_delete=ON")  # a forgotten text's bytes are zeroed
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():  # nothing stored yet: an empty memory, in RAM only
            self._db = self._connect(":memory:")
            self._migrate()
            self._db.execute("PRAGMA query_only=ON")
            return self._db
        refuse_empty_file(self.path)
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        db = self._connect(uri, uri=True)
        try:
            done = {r[0] for r in db.execute("SELECT name FROM migrations")}
        except sqlite3.OperationalError:
            # A WAL file is read through its `-shm` index, which SQLite must create beside it:
            # in a folder that cannot be written (a backup mounted read-only) it cannot. With
            # no `-wal` file nothing is waiting outside the database, and no writer can be
            # at work without one, so the file is read as it is.
            db.close()
            if Path(f"{self.path}-wal").exists():
                raise
            db = self._connect(f"{uri}&immutable=1", uri=True)
            done = {r[0] for r in db.execute("SELECT name FROM migrations")}
        if any(m.__name__ not in done for m in MIGRATIONS):
            db.close()
            raise OutdatedStore(f"{self.path} was written by an older Seelen: a writer updates it")
        return db

    def _create(self) -> None:
        """A new memory file appears complete or not at all: built under a private name and
        linked into place, so no process ever sees it empty (an empty one is damage)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        try:
            self._db = self._connect(tmp)
            self._migrate()
            self._db.close()
            os.chmod(tmp, 0o600)
            with contextlib.suppress(FileExistsError):  # another process was first: use it
                os.link(tmp, self.path)
        finally:
            for leftover in (tmp, *tmp.parent.glob(tmp.name + "-*")):
                leftover.unlink(missing_ok=True)

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections (the main one checkpoints the WAL)."""
        with self._lock:
            self._db.close()
            if self._second is not None:
                self._second.close()

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at INTEGER)"
            )
            done = {r[0] for r in self._db.execute("SELECT name FROM migrations")}
            for migration in MIGRATIONS:
                if migration.__name__ in done:
                    continue
                # executescript commits on its own, so BEGIN/COMMIT are part of the script.
                self._db.executescript(
                    f"BEGIN IMMEDIATE; {migration()};"
                    f"INSERT INTO migrations VALUES ('{migration.__name__}', {now_ms()}); COMMIT;"
                )

    def quick_check(self) -> str:
        """SQLite's own consistency check: 'ok' when the file is healthy."""
        return str(self._query("PRAGMA quick_check")[0][0])

    def applied_migrations(self) -> list[str]:
        """Names of the migrations applied to this database, in order."""
        return [r[0] for r in self._query("SELECT name FROM migrations ORDER BY rowid")]

    def _tx(self) -> Transaction:
        return Transaction(self._db, self._lock, self.path)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(explain(exc, self.path)) from None

    # --- sessions ------------------------------------------------------------------------

    def create_session(
        self, status: str = ACTIVE, *, start_ms: int | None = None, session_id: str = ""
    ) -> Session:
        """Start a new session (active unless said otherwise; a new id unless given)."""
        sid, ts = session_id or new_id(), start_ms if start_ms is not None else now_ms()
        with self._tx() as db:
            db.execute(
                "INSERT INTO session (session_id, start_timestamp, status) VALUES (?, ?, ?)",
                (sid, ts, status),
            )
        return Session(sid, ts, None, status, 0)

    def set_rolling_summary(
        self, session_id: str, summary: str, folded_count: int, upto_seq: int
    ) -> None:
        """Record the session's rolling summary, and the turns it covers (up to `upto_seq`)."""
        with self._tx() as db:
            db.execute(
                "UPDATE session SET rolling_summary = ?, folded_count = ?, folded_upto_seq = ? "
                "WHERE session_id = ?",
                (summary, folded_count, upto_seq, session_id),
            )

    def mark_archived(self, session_id: str) -> None:
        """Close a session: archived, with its end time."""
        with self._tx() as db:
            db.execute(
                "UPDATE session SET status = ?, end_timestamp = ? WHERE session_id = ?",
                (ARCHIVED, now_ms(), session_id),
            )

    def delete_session(self, session_id: str) -> list[str]:
        """Delete a session with its turns and summaries; returns the deleted text ids."""
        with self._tx() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT text_id FROM conversation WHERE session_id = ? UNION ALL "
                    "SELECT text_id FROM summary WHERE session_id = ?",
                    (session_id, session_id),
                )
            ]
            for table in ("conversation", "summary", "archive_step", "session"):
                db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            drop_forgotten_words(db, len(ids))
        return ids

    def clear_session(self, session_id: str) -> list[str]:
        """Remove every turn and the rolling summary of a session, and verbatim quotes of the
        turns in summaries; returns the removed text ids (for the vector index)."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT text_id, text FROM conversation WHERE session_id = ?", (session_id,)
            ).fetchall()
            ids = [r[0] for r in rows]
            scrub_quotes(db, [r[1] for r in rows])
            db.execute("DELETE FROM conversation WHERE session_id = ?", (session_id,))
            db.execute(
                "UPDATE session SET current_conv_count = 0, rolling_summary = '', "
                "folded_count = 0, folded_upto_seq = 0 WHERE session_id = ?",
                (session_id,),
            )
            drop_forgotten_words(db, len(ids))
        return ids

    # --- turns ---------------------------------------------------------------------------

    def add_turn(
        self,
        session_id: str,
        role: str,
        text: str,
        meta: dict[str, Any] | None = None,
        *,
        ts_ms: int | None = None,
    ) -> Turn:
        """Append one turn and commit it before returning."""
        return self.add_turns(session_id, [(role, text, meta, ts_ms)])[0]

    def add_turns(
        self,
        session_id: str,
        rows: Sequence[tuple[str, str, dict[str, Any] | None, int | None]],
    ) -> list[Turn]:
        """Append (role, text, meta, ts_ms or None) turns in one transaction."""
        out = []
        with self._tx() as db:
            for role, text, meta, ts in rows:
                meta = meta or {}
                text_id, ts = new_id(), ts if ts is not None else now_ms()
                spoken = role in SPOKEN_ROLES and not meta.get("tool_calls")
                cur = db.execute(
                    "INSERT INTO conversation (text_id, session_id, timestamp, role, text, meta, "
                    "indexed) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (text_id, session_id, ts, role, text, json.dumps(meta), 0 if spoken else 1),
                )
                out.append(Turn(text_id, session_id, ts, role, text, cur.lastrowid or 0, meta))
            db.execute(
                "UPDATE session SET current_conv_count = current_conv_count + ? "
                "WHERE session_id = ?",
                (len(rows), session_id),
            )
        return out

    def turns(
        self, session_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> list[Turn]:
        """The turns of a session in order: those after `after_seq`, up to `upto_seq`."""
        rows = self._query(
            "SELECT * FROM conversation WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
            (session_id, after_seq, upto_seq if upto_seq is not None else 2**62),
        )
        return [turn_row(r) for r in rows]

    def spoken_before(self, text_ids: Iterable[str]) -> dict[str, str]:
        """The text of the spoken turn just before each given turn in its session (what a
        short reply answers); turns that open their session are absent."""
        ids = list(text_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._query(
            "SELECT c.text_id, (SELECT p.text FROM conversation p WHERE p.session_id = "
            "c.session_id AND p.seq < c.seq AND p.role IN ('user', 'assistant') "
            f"ORDER BY p.seq DESC LIMIT 1) FROM conversation c WHERE c.text_id IN ({marks})",
            ids,
        )
        return {r[0]: r[1] for r in rows if r[1] is not None}

    def get_turns(self, text_ids: Iterable[str]) -> dict[str, Turn]:
        """Turns by text id (missing ids are simply absent)."""
        ids = list(text_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._query(f"SELECT * FROM conversation WHERE text_id IN ({marks})", ids)
        return {r["text_id"]: turn_row(r) for r in rows}

    def update_turn_text(self, text_id: str, text: str) -> None:
        """Replace one turn's text (used to strip quotation tags at archive)."""
        with self._tx() as db:
            db.execute("UPDATE conversation SET text = ? WHERE text_id = ?", (text, text_id))

    def delete_texts(self, text_ids: Iterable[str]) -> int:
        """Delete turns or summaries by text id, and verbatim quotes of the turns in summaries;
        returns how many rows went."""
        ids = list(text_ids)
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._tx() as db:
            quoted = db.execute(
                f"SELECT text, session_id FROM conversation WHERE text_id IN ({marks})", ids
            ).fetchall()
            scrub_quotes(db, [r[0] for r in quoted])
            n = db.execute(f"DELETE FROM conversation WHERE text_id IN ({marks})", ids).rowcount
            n += db.execute(f"DELETE FROM summary WHERE text_id IN ({marks})", ids).rowcount
            db.executemany(RECOUNT_TURNS, [(sid,) for sid in {r[1] for r in quoted}])
            drop_forgotten_words(db, n)
        return n
