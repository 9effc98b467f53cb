"""simonw/llm's `logs.db`: every prompt and response llm logged, one session per conversation.

llm 0.36 and later log into `threads` (a conversation), `turns` (one model call, with its
time and duration) and `turn_search` (the prompt as typed, without fragments, and the
response's text). Older versions logged into `conversations` and `responses`; a database
upgraded by llm keeps those rows there, so both are read (a response that also exists as a
turn is read once, as llm itself does). Each call becomes the user's prompt, at the time
llm logged it, and the model's response, at that time plus the call's duration. System
prompts, fragments, tool calls and tool results are left out. The file is opened read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from seelen.memory.imports.conversation import Conversation, HistoryError, Message, iso_to_ms

SOURCE = "llm"
SQLITE_MAGIC = b"SQLite format 3\x00"

_NEW = """
    SELECT t.thread_id AS conversation, th.name AS title, t.id AS id, s.prompt AS prompt,
           s.response AS response, t.model AS model, t.datetime_utc AS time,
           t.duration_ms AS duration
    FROM turns t JOIN turn_search s ON s.turn_id = t.id
    LEFT JOIN threads th ON th.id = t.thread_id
    ORDER BY t.thread_id, t.datetime_utc, t.id"""
_LEGACY = """
    SELECT coalesce(r.conversation_id, r.id) AS conversation, c.name AS title, r.id AS id,
           r.prompt AS prompt, r.response AS response, r.model AS model,
           r.datetime_utc AS time, r.duration_ms AS duration
    FROM responses r LEFT JOIN conversations c ON c.id = r.conversation_id
    WHERE {new_too}
    ORDER BY conversation, r.datetime_utc, r.id"""


def default_path() -> Path:
    """Where llm keeps its logs: `$LLM_USER_PATH/logs.db`, else its app folder's."""
    import os

    folder = os.environ.get("LLM_USER_PATH")
    if not folder:
        import click  # typer's own dependency: the same folder llm computes

        folder = click.get_app_dir("io.datasette.llm")
    return Path(folder) / "logs.db"


def read(path: Path) -> list[Conversation]:
    """Every conversation in llm's logs.db at `path` (opened read-only)."""
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open {path} ({exc})") from None
    try:
        db.row_factory = sqlite3.Row
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows: list[sqlite3.Row] = []
        if {"turns", "turn_search"} <= tables:
            rows += db.execute(_NEW).fetchall()
        if {"responses", "conversations"} <= tables:
            new_too = "r.id NOT IN (SELECT id FROM turns)" if "turns" in tables else "1"
            rows += db.execute(_LEGACY.format(new_too=new_too)).fetchall()
        elif not {"turns", "turn_search"} <= tables:
            raise HistoryError(f"{path} is an SQLite file, but not llm's logs.db")
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path} is not a readable llm logs.db ({exc})") from None
    finally:
        db.close()
    return _conversations(rows)


def _conversations(rows: list[sqlite3.Row]) -> list[Conversation]:
    grouped: dict[str, tuple[str, list[Message]]] = {}
    for row in rows:
        _, messages = grouped.setdefault(row["conversation"], (row["title"] or "", []))
        messages.extend(_messages(row))
    ordered = sorted(grouped.items(), key=lambda item: _first_time(item[1][1]))
    return [
        Conversation(SOURCE, key, title, tuple(sorted(messages, key=_time)))
        for key, (title, messages) in ordered
    ]


def _messages(row: sqlite3.Row) -> list[Message]:
    """A logged call as the prompt typed and the response shown (either may be empty: a
    call that only ran tools, or one that only returned their results)."""
    start = iso_to_ms(row["time"])  # llm writes UTC, with or without "+00:00"
    duration = row["duration"] if isinstance(row["duration"], int) else 0
    end = start + max(duration, 0) if start is not None else None
    meta: dict[str, Any] = {"model": row["model"]} if row["model"] else {}
    prompt, response = (
        v.strip() if isinstance(v, str) else "" for v in (row["prompt"], row["response"])
    )
    out = []
    if prompt:
        out.append(Message(f"{row['id']}:prompt", "user", prompt, start))
    if response:
        out.append(Message(f"{row['id']}:response", "assistant", response, end, meta))
    return out


def _time(message: Message) -> int:
    return message.ts_ms if message.ts_ms is not None else 0


def _first_time(messages: list[Message]) -> int:
    return min((_time(m) for m in messages), default=0)
