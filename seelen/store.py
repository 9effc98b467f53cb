"""SQLite: sessions, turns, summaries and their queries. The source of truth for every text.

Timestamps are integer milliseconds since the epoch; `seq` keeps the order of turns that
share a millisecond. Every write commits before it returns, so a crash loses nothing that
a caller was told is saved. One connection is shared between threads behind a lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seelen.errors import StoreError
from seelen.schema import FOLD_SEQ_FROM_COUNT, MIGRATIONS, fts_query, index_text, phrase
from seelen.sqlite_faults import explain, refuse_empty_file

ACTIVE, ARCHIVED = "active", "archived"
# An `ask --ephemeral` session: never restored, deleted when its one exchange is done.
EPHEMERAL = "ephemeral"
# Roles whose text is conversation (indexed, recalled); tool traffic is kept but not recalled.
SPOKEN_ROLES = ("user", "assistant")

# The turns that belong in the vector index: spoken words, not tool traffic.
_INDEXABLE_TURN = "role IN ('user', 'assistant') AND json_extract(meta, '$.tool_calls') IS NULL"


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
    folded_upto_seq: int = 0  # the rolling summary covers this session's turns up to this seq


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
            if not self.path.exists():
                self._create()
            refuse_empty_file(self.path)
            self._db = self._connect(self.path)
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(explain(exc, self.path)) from None

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        db.row_factory = sqlite3.Row
        # The word-index triggers call it: every connection that writes text needs it.
        db.create_function("seelen_words", 1, index_text, deterministic=True)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
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
        return _Transaction(self._db, self._lock, self.path)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(explain(exc, self.path)) from None

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
        """The newest active session whose archive has not begun, if any."""
        rows = self._query(
            "SELECT * FROM session WHERE status = ? AND NOT EXISTS (SELECT 1 FROM archive_step "
            "a WHERE a.session_id = session.session_id) ORDER BY start_timestamp DESC LIMIT 1",
            (ACTIVE,),
        )
        return _session(rows[0]) if rows else None

    def pending_archives(self) -> list[Session]:
        """Active sessions whose archive began but did not finish, oldest first."""
        rows = self._query(
            "SELECT * FROM session WHERE status = ? AND EXISTS (SELECT 1 FROM archive_step a "
            "WHERE a.session_id = session.session_id) ORDER BY start_timestamp",
            (ACTIVE,),
        )
        return [_session(r) for r in rows]

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
        rows = self._query(
            "SELECT * FROM session ORDER BY start_timestamp DESC, rowid DESC LIMIT ?", (limit,)
        )
        return [_session(r) for r in rows]

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
        return ids

    def clear_session(self, session_id: str) -> list[str]:
        """Remove every turn and the rolling summary of a session, and verbatim quotes of the
        turns in summaries; returns the removed text ids (for the vector index)."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT text_id, text FROM conversation WHERE session_id = ?", (session_id,)
            ).fetchall()
            ids = [r[0] for r in rows]
            _scrub_quotes(db, [r[1] for r in rows])
            db.execute("DELETE FROM conversation WHERE session_id = ?", (session_id,))
            db.execute(
                "UPDATE session SET current_conv_count = 0, rolling_summary = '', "
                "folded_count = 0, folded_upto_seq = 0 WHERE session_id = ?",
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

    def turns(
        self, session_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> list[Turn]:
        """The turns of a session in order: those after `after_seq`, up to `upto_seq`."""
        rows = self._query(
            "SELECT * FROM conversation WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
            (session_id, after_seq, upto_seq if upto_seq is not None else 2**62),
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
        """Delete turns or summaries by text id, and verbatim quotes of the turns in summaries;
        returns how many rows went."""
        ids = list(text_ids)
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._tx() as db:
            quoted = db.execute(f"SELECT text FROM conversation WHERE text_id IN ({marks})", ids)
            _scrub_quotes(db, [r[0] for r in quoted.fetchall()])
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

    def import_records(
        self, sessions: Sequence[Session], turns: Sequence[Turn], summaries: Sequence[Summary]
    ) -> tuple[int, int, int]:
        """Insert sessions, turns and summaries with their own ids and times, in one
        transaction; rows whose id is already stored are left as they are (so importing twice
        adds nothing). Returns how many sessions, turns and summaries were new."""
        with self._tx() as db:
            new = (
                sum(_insert_session(db, s) for s in sessions),
                sum(_insert_turn(db, t) for t in turns),
                sum(_insert_summary(db, m) for m in summaries),
            )
            for sid in {s.session_id for s in sessions}:
                db.execute(
                    "UPDATE session SET current_conv_count = (SELECT count(*) FROM conversation "
                    "WHERE session_id = ?1) WHERE session_id = ?1",
                    (sid,),
                )
            db.execute(FOLD_SEQ_FROM_COUNT)  # an export carries the count; the seq is ours
        return new

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
        with self._tx() as db:
            # In chunks: SQLite limits the number of parameters in one statement.
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for table in ("conversation", "summary"):
                    db.execute(
                        f"UPDATE {table} SET indexed = ? WHERE text_id IN ({marks})",
                        [int(indexed), *chunk],
                    )

    def mark_all_unindexed(self) -> None:
        """Queue every spoken turn and summary for (re-)indexing, e.g. after a model change."""
        with self._tx() as db:
            db.execute(f"UPDATE conversation SET indexed = 0 WHERE {_INDEXABLE_TURN}")
            db.execute("UPDATE summary SET indexed = 0")

    def index_flags(self, kind: str) -> dict[str, bool]:
        """text_id → marked as in the vector index, for every text of `kind` ("turns" or
        "summaries") that belongs there; compared with the index to find drift."""
        if kind == "turns":
            sql = f"SELECT text_id, indexed FROM conversation WHERE {_INDEXABLE_TURN}"
        else:
            sql = "SELECT text_id, indexed FROM summary"
        return {r[0]: bool(r[1]) for r in self._query(sql)}

    def indexable(self, kind: str, after: int, limit: int) -> tuple[int, list[Turn | Summary]]:
        """The next `limit` texts of `kind` that belong in the vector index, after the
        position `after` (0 at first); returns the position to continue from."""
        if kind == "turns":
            sql = f"SELECT seq AS pos, * FROM conversation WHERE {_INDEXABLE_TURN} AND seq > ?"
            make: Any = _turn
        else:
            sql = "SELECT rowid AS pos, * FROM summary WHERE rowid > ?"
            make = _summary
        rows = self._query(sql + " ORDER BY pos LIMIT ?", (after, limit))
        return (rows[-1]["pos"] if rows else after), [make(r) for r in rows]

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


# Shorter texts ("yes", "I'm fine") would match unrelated summaries by chance.
MIN_QUOTE_CHARS = 24
FORGOTTEN = "[forgotten]"


def _scrub_quotes(db: sqlite3.Connection, texts: Iterable[str]) -> None:
    """Replace verbatim copies of forgotten texts in summaries; changed summaries are queued
    for re-embedding (their vector is replaced by text id). Paraphrases cannot be found."""
    for text in {t.strip() for t in texts if len(t.strip()) >= MIN_QUOTE_CHARS}:
        db.execute(
            "UPDATE summary SET summary = replace(summary, ?1, ?2), indexed = 0 "
            "WHERE instr(summary, ?1) > 0",
            (text, FORGOTTEN),
        )
        db.execute(
            "UPDATE session SET rolling_summary = replace(rolling_summary, ?1, ?2) "
            "WHERE instr(rolling_summary, ?1) > 0",
            (text, FORGOTTEN),
        )


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
        r["folded_upto_seq"],
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


def _insert_session(db: sqlite3.Connection, s: Session) -> int:
    row = (s.session_id, s.start_ms, s.end_ms, s.status, s.rolling_summary, s.folded_count)
    return db.execute(
        "INSERT OR IGNORE INTO session (session_id, start_timestamp, end_timestamp, status, "
        "rolling_summary, folded_count) VALUES (?, ?, ?, ?, ?, ?)",
        row,
    ).rowcount


def _insert_turn(db: sqlite3.Connection, t: Turn) -> int:
    spoken = t.role in SPOKEN_ROLES and not t.meta.get("tool_calls")
    row = (t.text_id, t.session_id, t.ts_ms, t.role, t.text, json.dumps(t.meta), int(not spoken))
    return db.execute(
        "INSERT OR IGNORE INTO conversation (text_id, session_id, timestamp, role, text, meta, "
        "indexed) VALUES (?, ?, ?, ?, ?, ?, ?)",
        row,
    ).rowcount


def _insert_summary(db: sqlite3.Connection, m: Summary) -> int:
    # One final summary per session, as `add_summary` keeps it: a stored one wins.
    return db.execute(
        "INSERT INTO summary (text_id, session_id, summary, start_timestamp, end_timestamp) "
        "SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM summary WHERE text_id = ? "
        "OR session_id = ?)",
        (m.text_id, m.session_id, m.text, m.start_ms, m.end_ms, m.text_id, m.session_id),
    ).rowcount
