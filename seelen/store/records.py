"""The store's records (sessions, turns, summaries), their rows, and small SQL helpers."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ACTIVE, ARCHIVED = "active", "archived"
# Shown, never stored: an active session whose archive began and waits for the next start.
ARCHIVE_PENDING = "archive pending"
# An `ask --ephemeral` session: never restored, deleted when its one exchange is done.
EPHEMERAL = "ephemeral"
# Roles whose text is conversation (indexed, recalled); tool traffic is kept but not recalled.
SPOKEN_ROLES = ("user", "assistant")
# A session's turn count made true again (after turns were added by import, or forgotten).
RECOUNT_TURNS = (
    "UPDATE session SET current_conv_count = (SELECT count(*) FROM conversation "
    "WHERE session_id = ?1) WHERE session_id = ?1"
)

# The turns that belong in the vector index: spoken words, not tool traffic.
INDEXABLE_TURN = "role IN ('user', 'assistant') AND json_extract(meta, '$.tool_calls') IS NULL"


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
    archive_begun: bool = False  # an archive step is recorded (it finished, or is pending)

    @property
    def shown_status(self) -> str:
        """The status as users and the model are told it: an active session whose archive
        began but did not finish (a /save whose model failed; the next start finishes it) is
        "archive pending", never a second "active" one beside the session talked in."""
        return ARCHIVE_PENDING if self.status == ACTIVE and self.archive_begun else self.status


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


# Shorter texts ("yes", "I'm fine") would match unrelated summaries by chance.
MIN_QUOTE_CHARS = 24
FORGOTTEN = "[forgotten]"


def scrub_quotes(db: sqlite3.Connection, texts: Iterable[str]) -> None:
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


def drop_forgotten_words(db: sqlite3.Connection, deleted: int) -> None:
    """Rewrite the word indexes without the rows just deleted. FTS5 only marks a deleted
    row's words as gone: they stayed readable in the file until a merge, so a forgotten
    text could still be read from chat_sessions.db. The merge rewrites the whole index, so
    it runs only when rows went (`deleted`, how many): 38 ms on 7,200 turns and 300
    summaries (load 10), 0.19-0.30 s at 100k turns and 1.97-2.74 s at a million (load
    1.5-2; 2 cores)."""
    if not deleted:
        return
    for table in ("conversation_fts", "summary_fts"):
        db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


# Longer than any id Seelen makes (uuid hex: 32 characters), so a longer prefix matches
# nothing; and far below SQLite's limit on a LIKE pattern (50,000 bytes), which a pasted
# text overruns ("LIKE or GLOB pattern too complex", taken for a damaged database).
LONGEST_ID = 64


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching `prefix` literally at the start (escape character: \\). A
    prefix longer than any id is cut to LONGEST_ID + 1 characters: it still matches none."""
    prefix = prefix[: LONGEST_ID + 1]
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


# The columns every session query selects: the row, and whether its archive began.
SESSION_COLUMNS = (
    "*, EXISTS (SELECT 1 FROM archive_step a WHERE a.session_id = session.session_id) "
    "AS archive_begun"
)


def session_row(r: sqlite3.Row) -> Session:
    """A session from a row selected with `SESSION_COLUMNS`."""
    return Session(
        r["session_id"],
        r["start_timestamp"],
        r["end_timestamp"],
        r["status"],
        r["current_conv_count"],
        r["rolling_summary"],
        r["folded_count"],
        r["folded_upto_seq"],
        bool(r["archive_begun"]),
    )


def turn_row(r: sqlite3.Row) -> Turn:
    meta = r["meta"]
    return Turn(
        r["text_id"],
        r["session_id"],
        r["timestamp"],
        r["role"],
        r["text"],
        r["seq"],
        # Most turns have none: a recall reads ~200 rows, and parsing "{}" cost ~1 ms of them.
        json.loads(meta) if meta and meta != "{}" else {},
    )


def summary_row(r: sqlite3.Row) -> Summary:
    return Summary(
        r["text_id"], r["session_id"], r["summary"], r["start_timestamp"], r["end_timestamp"]
    )


def insert_session(db: sqlite3.Connection, s: Session) -> int:
    row = (s.session_id, s.start_ms, s.end_ms, s.status, s.rolling_summary, s.folded_count)
    return db.execute(
        "INSERT OR IGNORE INTO session (session_id, start_timestamp, end_timestamp, status, "
        "rolling_summary, folded_count) VALUES (?, ?, ?, ?, ?, ?)",
        row,
    ).rowcount


def insert_turn(db: sqlite3.Connection, t: Turn) -> int:
    spoken = t.role in SPOKEN_ROLES and not t.meta.get("tool_calls")
    row = (t.text_id, t.session_id, t.ts_ms, t.role, t.text, json.dumps(t.meta), int(not spoken))
    return db.execute(
        "INSERT OR IGNORE INTO conversation (text_id, session_id, timestamp, role, text, meta, "
        "indexed) VALUES (?, ?, ?, ?, ?, ?, ?)",
        row,
    ).rowcount


def insert_summary(db: sqlite3.Connection, m: Summary) -> int:
    # One final summary per session, as `add_summary` keeps it: a stored one wins.
    return db.execute(
        "INSERT INTO summary (text_id, session_id, summary, start_timestamp, end_timestamp) "
        "SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM summary WHERE text_id = ? "
        "OR session_id = ?)",
        (m.text_id, m.session_id, m.text, m.start_ms, m.end_ms, m.text_id, m.session_id),
    ).rowcount
