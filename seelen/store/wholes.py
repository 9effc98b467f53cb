"""The store's counts for ranking sessions as wholes (memory/whole.py): which sessions hold
each word of a question, in how many turns, and how long they are.

Mixed into `Store`, whose connection, lock and `_query` it uses. Which session a turn belongs
to is read once into an array by the turn's row number (seq, `RowSessions`), then only the
rows added since are read: counting a word's sessions by joining each of its up to
COMMON_ROWS index entries to its turn cost 4 ms a question at 100k turns (as much as the
direct BM25 search), through the array 1.7 ms. A turn's row number and session never change
(AUTOINCREMENT never reuses one); a deleted turn simply leaves the word index, so its stale
entry is never read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from seelen.store.schema import fts_terms


class SessionWords:
    """Words counted per session, for BM25 over sessions."""

    _query: Callable[..., list[Any]]
    common_rows: int
    _rows_holding: Callable[..., dict[str, int]]
    rows_with: Callable[[Sequence[str]], list[np.ndarray]]
    _rows_stored: Callable[[], int]
    _row_sessions: RowSessions | None = None  # made at the first question

    def session_words(self, query: str) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]]]:
        """The sessions' names, and for each of the question's words held by at most
        COMMON_ROWS spoken turns: the sessions holding it (indexes into the names) and in how
        many of their turns."""
        held = self._rows_holding("conversation_fts", "text", fts_terms(query))
        terms = [t for t, n in held.items() if 0 < n <= self.common_rows]
        if not terms:
            return [], []
        names, of_row = self._session_rows()
        words = []
        for seqs in self.rows_with(terms):
            found = of_row[seqs[seqs < len(of_row)]]
            words.append(np.unique(found[found >= 0], return_counts=True))
        return names, words

    def session_sizes(self, sessions: Sequence[str], count: int) -> tuple[dict[str, int], float]:
        """The rows of each of `sessions` (tool traffic too: counted from the session index
        alone) and the mean rows of a session over the whole memory of `count` sessions (rows
        ever stored stand in for the rows: a count would scan every one)."""
        marks = ",".join("?" * len(sessions))
        rows = self._query(
            f"SELECT session_id, count(*) FROM conversation WHERE session_id IN ({marks}) "
            "GROUP BY session_id",
            list(sessions),
        )
        return {r[0]: r[1] for r in rows}, self._rows_stored() / max(count, 1)

    def summarised(self, sessions: Sequence[str]) -> set[str]:
        """Those of `sessions` that have a summary."""
        marks = ",".join("?" * len(sessions))
        rows = self._query(
            f"SELECT DISTINCT session_id FROM summary WHERE session_id IN ({marks})",
            list(sessions),
        )
        return {r[0] for r in rows}

    def _session_rows(self) -> tuple[list[str], np.ndarray]:
        """The session names, and each turn row's index among them (-1: no turn), read up
        to the newest row (only the rows added since the last call are read)."""
        if self._row_sessions is None:
            self._row_sessions = RowSessions()
        return self._row_sessions.read(self._query)


class RowSessions:
    """Which session each turn row (seq) belongs to, as an array, kept up to date.

    Read as each session's range of rows: a session's turns are mostly one run of rows (an
    import, a chat), so one grouped pass over the session index gives them, and only a
    session whose rows interleave with another's (an ask while a chat was open) is read
    row by row. At a million turns in 50,000 sessions: 0.4 s once, against 2.0 s for
    reading every row; then a call reads only the rows added since.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = []
        self._number: dict[str, int] = {}
        self.of_row = np.full(1, -1, dtype=np.int32)

    def read(self, query: Callable[..., list[Any]]) -> tuple[list[str], np.ndarray]:
        """The names and the array, after reading the rows added since the last call."""
        with self._lock:
            start = len(self.of_row)
            # The first read scans the session index (covering); a later one reads the rows
            # after `start` by row number (NOT INDEXED: by the session index it scanned every
            # row again, 7 ms a question at 100k turns, 60-80 ms at 1M; by row number 0.05).
            table = "conversation" if start <= 1 else "conversation NOT INDEXED"
            runs = query(
                f"SELECT session_id, min(seq), max(seq), count(*) FROM {table} "
                "WHERE seq >= ? GROUP BY session_id",
                (start,),
            )
            if not runs:
                return self.names, self.of_row
            of_row = np.full(max(r[2] for r in runs) + 1, -1, dtype=np.int32)
            of_row[:start] = self.of_row
            for session, low, high, count in runs:
                number = self._number.setdefault(session, len(self._number))
                if number == len(self.names):
                    self.names.append(session)
                if count == high - low + 1:  # one run: every row between is this session's
                    of_row[low : high + 1] = number
                    continue
                rows = query(
                    "SELECT seq FROM conversation WHERE session_id = ? AND seq >= ?",
                    (session, start),
                )
                of_row[[r[0] for r in rows]] = number
            self.of_row = of_row
            return self.names, self.of_row
