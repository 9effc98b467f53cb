"""Sessions' final summaries and the archive's recorded steps.

Mixed into `Store`, whose connection, lock and `_query`/`_tx` they use. A step's record is
written in the same transaction as what the step stored (the summary, the rewritten turns,
the archived status), so a crash leaves both or neither: a resumed archive never redoes a
step whose work was kept, and so never adds a session's summary twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from seelen.store.records import ARCHIVED, Summary, new_id, now_ms, summary_row

# The step an archive records together with the session's summary (`add_summary`).
SUMMARY_STEP = "summary"


class Archiving:
    """Summaries and archive steps."""

    _query: Callable[..., list[Any]]
    _tx: Callable[..., Any]

    def add_summary(
        self, session_id: str, text: str, start_ms: int, end_ms: int, *, step: bool = False
    ) -> Summary:
        """Store the final summary of a session (replacing an earlier one); with `step`, also
        record the archive's `summary` step (the text as its payload), in one transaction."""
        text_id = new_id()
        with self._tx() as db:
            db.execute("DELETE FROM summary WHERE session_id = ?", (session_id,))
            db.execute(
                "INSERT INTO summary (text_id, session_id, summary, start_timestamp, "
                "end_timestamp) VALUES (?, ?, ?, ?, ?)",
                (text_id, session_id, text, start_ms, end_ms),
            )
            if step:
                _record(db, session_id, SUMMARY_STEP, text)
        return Summary(text_id, session_id, text, start_ms, end_ms)

    def get_summaries(self, text_ids: Iterable[str]) -> dict[str, Summary]:
        """Summaries by text id."""
        ids = list(text_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._query(f"SELECT * FROM summary WHERE text_id IN ({marks})", ids)
        return {r["text_id"]: summary_row(r) for r in rows}

    def session_summary(self, session_id: str) -> Summary | None:
        """The final summary of a session, if it has one."""
        rows = self._query("SELECT * FROM summary WHERE session_id = ?", (session_id,))
        return summary_row(rows[0]) if rows else None

    def archive_steps(self, session_id: str) -> dict[str, str]:
        """Finished archive steps of a session: step name → payload."""
        rows = self._query(
            "SELECT step, payload FROM archive_step WHERE session_id = ?", (session_id,)
        )
        return {r[0]: r[1] for r in rows}

    def record_archive_step(
        self,
        session_id: str,
        step: str,
        payload: str = "",
        *,
        rewritten: Mapping[str, str] | None = None,
    ) -> None:
        """Record that one archive step is done, with the turn texts it rewrote (text id →
        new text) in the same transaction; those are queued to be embedded again."""
        with self._tx() as db:
            for text_id, text in (rewritten or {}).items():
                db.execute(
                    "UPDATE conversation SET text = ?, indexed = 0 WHERE text_id = ?",
                    (text, text_id),
                )
            _record(db, session_id, step, payload)

    def close_archive(self, session_id: str) -> None:
        """The archive's last step: the session archived, with its end time, and recorded."""
        with self._tx() as db:
            db.execute(
                "UPDATE session SET status = ?, end_timestamp = ? WHERE session_id = ?",
                (ARCHIVED, now_ms(), session_id),
            )
            _record(db, session_id, "archived", "")


def _record(db: sqlite3.Connection, session_id: str, step: str, payload: str) -> None:
    db.execute(
        "INSERT OR REPLACE INTO archive_step VALUES (?, ?, ?, ?)",
        (session_id, step, now_ms(), payload),
    )
