"""The store's queries about sessions: which exist, in which state, and whether an archive
began (every row is selected with `SESSION_COLUMNS`, so `Session.shown_status` needs no query).

Mixed into `Store`, whose connection and `_query` they use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from seelen.store.records import ACTIVE, SESSION_COLUMNS, Session, like_prefix, session_row


class SessionReads:
    """Sessions as stored, newest or oldest first, by id, prefix or state."""

    _query: Callable[..., list[Any]]

    def sessions_with_status(self, status: str) -> list[Session]:
        """All sessions in one state, oldest first."""
        rows = self._query(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE status = ? ORDER BY start_timestamp",
            (status,),
        )
        return [session_row(r) for r in rows]

    def active_session(self) -> Session | None:
        """The newest active session whose archive has not begun, if any."""
        rows = self._query(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE status = ? AND NOT archive_begun "
            "ORDER BY start_timestamp DESC LIMIT 1",
            (ACTIVE,),
        )
        return session_row(rows[0]) if rows else None

    def pending_archives(self) -> list[Session]:
        """Active sessions whose archive began but did not finish, oldest first."""
        rows = self._query(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE status = ? AND archive_begun "
            "ORDER BY start_timestamp",
            (ACTIVE,),
        )
        return [session_row(r) for r in rows]

    def get_session(self, session_id: str) -> Session | None:
        """One session by id, or None."""
        rows = self._query(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE session_id = ?", (session_id,)
        )
        return session_row(rows[0]) if rows else None

    def find_sessions(self, prefix: str) -> list[Session]:
        """Sessions whose id starts with `prefix` (so users can type short ids)."""
        pattern = like_prefix(prefix)
        rows = self._query(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE session_id LIKE ? ESCAPE '\\' "
            "ORDER BY start_timestamp",
            (pattern,),
        )
        return [session_row(r) for r in rows]

    def list_sessions(self, limit: int = 50, offset: int = 0) -> list[Session]:
        """The newest sessions first (past the `offset` newest), each with the turns it holds
        now (counted: an older Seelen kept the count of before a forget)."""
        rows = self._query(
            f"SELECT {SESSION_COLUMNS}, (SELECT count(*) FROM conversation c WHERE c.session_id "
            "= session.session_id) AS turns_now FROM session "
            "ORDER BY start_timestamp DESC, rowid DESC LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [replace(session_row(r), conv_count=r["turns_now"]) for r in rows]
