"""SQLite: sessions, turns, summaries and their queries. The source of truth for every text.

Timestamps are integer milliseconds since the epoch; `seq` keeps the order of turns that
share a millisecond. Every write commits before it returns, so a crash loses nothing that
a caller was told is saved. One connection is shared between threads behind a lock.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seelen.errors import StoreError
from seelen.schema import MIGRATIONS, fts_query, index_text, phrase

ACTIVE, ARCHIVED = "active", "archived"
# An `ask --ephemeral` session: never restored, deleted when its one exchange is done.
EPHEMERAL = "ephemeral"
# Roles whose text is conversation (indexed, recalled); tool traffic is kept but not recalled.
SPOKEN_ROLES = ("user", "assistant")


def now_ms() -> int:
    """The current time in integer milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A fresh random id for sessions and texts."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Session:
    session_id: str
    start_ms: int
    end_ms: int | None
    status: str
    conv_count: int
    rolling_summary: str = ""
    folded_count: int = 0


@dataclass(frozen=True)
class Turn:
    text_id: str
    session_id: str
    ts_ms: int
    role: str
    text: str
    seq: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Summary:
    text_id: str
    session_id: str
    text: str
    start_ms: int
    end_ms: int


class Store:
    """The SQLite memory store of one profile."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10
            )
            self._db.row_factory = sqlite3.Row
            # The word-index triggers call it: every connection that writes text needs it.
            self._db.create_function("seelen_words", 1, index_text, deterministic=True)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from None

    # --- plumbing ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (checkpointing the WAL)."""
        with self._lock:
            self._db.close()

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
        return self._query("PRAGMA quick_check")[0][0]

    def applied_migrations(self) -> list[str]:
        """Names of the migrations applied to this database, in order."""
        return [r[0] for r in self._query("SELECT name FROM migrations ORDER BY rowid")]

    def _tx(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # --- sessions ------------------------------------------------------------------------

    def create_session(self, status: str = ACTIVE, *, start_ms: int | None = None) -> Session:
        """Start a new session (active unless said otherwise)."""
        sid, ts = new_id(), start_ms if start_ms is not None else now_ms()
        with self._tx() as db:
            db.execute(
                "INSERT INTO session (session_id, start_timestamp, status) VALUES (?, ?, ?)",
                (sid, ts, status),
            )
        return Session(sid, ts, None, status, 0)

    def sessions_with_status(self, status: str) -> list[Session]:
        """All sessions in one state, oldest first."""
        rows = self._query(
            "SELECT * FROM session WHERE status = ? ORDER BY start_timestamp", (status,)
        )
        return [_session(r) for r in rows]

    def active_session(self) -> Session | None:
        """The newest session that is not archived yet, if any."""
        rows = self._query(
            "SELECT * FROM session WHERE status = ? ORDER BY start_timestamp DESC LIMIT 1",
            (ACTIVE,),
        )
        return _session(rows[0]) if rows else None

    def get_session(self, session_id: str) -> Session | None:
        """One session by id, or None."""
        rows = self._query("SELECT * FROM session WHERE session_id = ?", (session_id,))
        return _session(rows[0]) if rows else None

    def find_sessions(self, prefix: str) -> list[Session]:
        """Sessions whose id starts with `prefix` (so users can type short ids)."""
        pattern = _like_prefix(prefix)
        rows = self._query(
            "SELECT * FROM session WHERE session_id LIKE ? ESCAPE '\\' ORDER BY start_timestamp",
            (pattern,),
        )
        return [_session(r) for r in rows]

    def list_sessions(self, limit: int = 50) -> list[Session]:
        """The newest sessions first."""
        rows = self._query("SELECT * FROM session ORDER BY start_timestamp DESC LIMIT ?", (limit,))
        return [_session(r) for r in rows]

    def set_rolling_summary(self, session_id: str, summary: str, folded_count: int) -> None:
        """Record the session's rolling summary and how many of its turns it covers."""
        with self._tx() as db:
            db.execute(
                "UPDATE session SET rolling_summary = ?, folded_count = ? WHERE session_id = ?",
                (summary, folded_count, session_id),
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
        return ids

    def clear_session(self, session_id: str) -> list[str]:
        """Remove every turn and the rolling summary of a session; returns the text ids."""
        with self._tx() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT text_id FROM conversation WHERE session_id = ?", (session_id,)
                )
            ]
            db.execute("DELETE FROM conversation WHERE session_id = ?", (session_id,))
            db.execute(
                "UPDATE session SET current_conv_count = 0, rolling_summary = '', "
                "folded_count = 0 WHERE session_id = ?",
                (session_id,),
            )
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

    def turns(self, session_id: str, *, after: int = 0) -> list[Turn]:
        """The turns of a session in order, skipping the first `after` of them."""
        rows = self._query(
            "SELECT * FROM conversation WHERE session_id = ? ORDER BY seq LIMIT -1 OFFSET ?",
            (session_id, after),
        )
        return [_turn(r) for r in rows]

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
        return {r["text_id"]: _turn(r) for r in rows}

    def update_turn_text(self, text_id: str, text: str) -> None:
        """Replace one turn's text (used to strip quotation tags at archive)."""
        with self._tx() as db:
            db.execute("UPDATE conversation SET text = ? WHERE text_id = ?", (text, text_id))

    def delete_texts(self, text_ids: Iterable[str]) -> int:
        """Delete turns or summaries by text id; returns how many rows went."""
        ids = list(text_ids)
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._tx() as db:
            n = db.execute(f"DELETE FROM conversation WHERE text_id IN ({marks})", ids).rowcount
            n += db.execute(f"DELETE FROM summary WHERE text_id IN ({marks})", ids).rowcount
        return n

    def has_history(self, exclude_session: str | None = None) -> bool:
        """True when anything outside `exclude_session` could be recalled."""
        rows = self._query(
            "SELECT EXISTS (SELECT 1 FROM summary WHERE session_id IS NOT ?) OR EXISTS "
            "(SELECT 1 FROM conversation WHERE session_id IS NOT ? "
            "AND role IN ('user', 'assistant'))",
            (exclude_session, exclude_session),
        )
        return bool(rows[0][0])

    def find_text_ids(self, prefix: str) -> list[str]:
        """Turn and summary ids that start with `prefix`."""
        pattern = _like_prefix(prefix)
        rows = self._query(
            "SELECT text_id FROM conversation WHERE text_id LIKE ? ESCAPE '\\' UNION ALL "
            "SELECT text_id FROM summary WHERE text_id LIKE ? ESCAPE '\\'",
            (pattern, pattern),
        )
        return [r[0] for r in rows]

    def count_turns(self) -> int:
        """How many turns are stored in all sessions."""
        return self._query("SELECT count(*) FROM conversation")[0][0]

    # --- summaries -----------------------------------------------------------------------

    def add_summary(self, session_id: str, text: str, start_ms: int, end_ms: int) -> Summary:
        """Store the final summary of a session (replacing an earlier one)."""
        text_id = new_id()
        with self._tx() as db:
            db.execute("DELETE FROM summary WHERE session_id = ?", (session_id,))
            db.execute(
                "INSERT INTO summary (text_id, session_id, summary, start_timestamp, "
                "end_timestamp) VALUES (?, ?, ?, ?, ?)",
                (text_id, session_id, text, start_ms, end_ms),
            )
        return Summary(text_id, session_id, text, start_ms, end_ms)

    def get_summaries(self, text_ids: Iterable[str]) -> dict[str, Summary]:
        """Summaries by text id."""
        ids = list(text_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._query(f"SELECT * FROM summary WHERE text_id IN ({marks})", ids)
        return {r["text_id"]: _summary(r) for r in rows}

    def session_summary(self, session_id: str) -> Summary | None:
        """The final summary of a session, if it has one."""
        rows = self._query("SELECT * FROM summary WHERE session_id = ?", (session_id,))
        return _summary(rows[0]) if rows else None

    # --- full-text search (BM25) ---------------------------------------------------------

    def search_turns_text(
        self,
        query: str,
        limit: int,
        *,
        exclude_session: str | None = None,
        only_sessions: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """(text_id, score) of spoken turns by BM25, best first; higher score = better."""
        words = fts_query(query)
        if not words or limit <= 0 or only_sessions == []:
            return []
        match = f"(text : ({words}))"
        if only_sessions:
            match += f" AND (session_id : ({' OR '.join(phrase(s) for s in only_sessions)}))"
        if exclude_session is not None:
            match += f" NOT (session_id : {phrase(exclude_session)})"
        rows = self._query(
            "SELECT c.text_id, -f.rank, c.session_id FROM (SELECT rowid, rank FROM "
            "conversation_fts WHERE conversation_fts MATCH ? ORDER BY rank LIMIT ?) f "
            "JOIN conversation c ON c.seq = f.rowid ORDER BY f.rank",
            (match, limit),
        )
        # Phrase matching on ids is exact for our hex ids; the check keeps odd ids exact too.
        return [
            (r[0], r[1])
            for r in rows
            if r[2] != exclude_session and (not only_sessions or r[2] in only_sessions)
        ]

    def search_summaries_text(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> list[tuple[str, float]]:
        """(text_id, score) of session summaries by BM25, best first; higher score = better."""
        match = fts_query(query)
        if not match or limit <= 0:
            return []
        sql = (
            "SELECT c.text_id, -bm25(summary_fts) AS score FROM summary_fts JOIN summary c "
            "ON c.rowid = summary_fts.rowid WHERE summary_fts MATCH ?"
        )
        params: list[Any] = [match]
        if exclude_session is not None:
            sql += " AND c.session_id != ?"
            params.append(exclude_session)
        rows = self._query(sql + " ORDER BY score DESC LIMIT ?", [*params, limit])
        return [(r[0], r[1]) for r in rows]

    # --- vector-index bookkeeping --------------------------------------------------------

    def unindexed(self, limit: int = 256) -> tuple[list[Turn], list[Summary]]:
        """Texts not yet in the vector index (new, or left behind by a crash)."""
        turns = self._query(
            "SELECT * FROM conversation WHERE indexed = 0 ORDER BY seq LIMIT ?", (limit,)
        )
        sums = self._query("SELECT * FROM summary WHERE indexed = 0 LIMIT ?", (limit,))
        return [_turn(r) for r in turns], [_summary(r) for r in sums]

    def count_unindexed(self) -> int:
        """How many texts wait for the vector index."""
        rows = self._query(
            "SELECT (SELECT count(*) FROM conversation WHERE indexed = 0) + "
            "(SELECT count(*) FROM summary WHERE indexed = 0)"
        )
        return rows[0][0]

    def mark_indexed(self, text_ids: Iterable[str], indexed: bool = True) -> None:
        """Record that these texts are (or are no longer) in the vector index."""
        ids = list(text_ids)
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with self._tx() as db:
            for table in ("conversation", "summary"):
                db.execute(
                    f"UPDATE {table} SET indexed = ? WHERE text_id IN ({marks})",
                    [int(indexed), *ids],
                )

    def mark_all_unindexed(self) -> None:
        """Queue every spoken turn and summary for (re-)indexing, e.g. after a model change."""
        with self._tx() as db:
            db.execute(
                "UPDATE conversation SET indexed = 0 WHERE role IN ('user', 'assistant') "
                "AND json_extract(meta, '$.tool_calls') IS NULL"
            )
            db.execute("UPDATE summary SET indexed = 0")

    # --- archive steps -------------------------------------------------------------------

    def archive_steps(self, session_id: str) -> dict[str, str]:
        """Finished archive steps of a session: step name → payload."""
        rows = self._query(
            "SELECT step, payload FROM archive_step WHERE session_id = ?", (session_id,)
        )
        return {r[0]: r[1] for r in rows}

    def record_archive_step(self, session_id: str, step: str, payload: str = "") -> None:
        """Record that one archive step is done."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO archive_step VALUES (?, ?, ?, ?)",
                (session_id, step, now_ms(), payload),
            )


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT under the store's lock; ROLLBACK on any error."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db, self._lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._db

    def __exit__(self, exc_type: object, *_: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern matching `prefix` literally at the start (escape character: \\)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _session(r: sqlite3.Row) -> Session:
    return Session(
        r["session_id"],
        r["start_timestamp"],
        r["end_timestamp"],
        r["status"],
        r["current_conv_count"],
        r["rolling_summary"],
        r["folded_count"],
    )


def _turn(r: sqlite3.Row) -> Turn:
    return Turn(
        r["text_id"],
        r["session_id"],
        r["timestamp"],
        r["role"],
        r["text"],
        r["seq"],
        json.loads(r["meta"] or "{}"),
    )


def _summary(r: sqlite3.Row) -> Summary:
    return Summary(
        r["text_id"], r["session_id"], r["summary"], r["start_timestamp"], r["end_timestamp"]
    )
