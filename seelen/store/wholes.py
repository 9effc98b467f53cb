"""The store's counts for ranking sessions as wholes (memory/whole.py): which sessions hold
each word of a question, in how many turns, and how long they are.

Mixed into `Store`, whose connection, lock and `_query` it uses. Which session a turn belongs
to is read once into an array by the turn's row number (seq), then only the rows added since
are read: counting a word's sessions by joining each of its up to COMMON_ROWS index entries to
its turn cost 4 ms a question at 100k turns (as much as the direct BM25 search), through the
array 0.x ms. A turn's row number and session never change (AUTOINCREMENT never reuses one); a
deleted turn simply leaves the word index, so its stale entry is never read.
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
        for term in terms:
            (listed,) = self._query(  # one string, not a row object per turn (0.3 ms each)
                "SELECT group_concat(rowid) FROM conversation_fts WHERE conversation_fts MATCH ?",
                (f"text : {term}",),
            )[0]
            seqs = np.array(listed.split(",") if listed else [], dtype=np.int64)
            found = of_row[seqs[seqs < len(of_row)]]
            words.append(np.unique(found[found >= 0], return_counts=True))
        return names, words

    def session_sizes(self, sessions: Sequence[str]) -> tuple[dict[str, int], float]:
        """The rows of each of `sessions` (tool traffic too: counted from the session index
        alone) and the mean rows of a session over the whole memory (rows ever stored stand
        in for the rows: a count would scan every one)."""
        marks = ",".join("?" * len(sessions))
        rows = self._query(
            f"SELECT session_id, count(*) FROM conversation WHERE session_id IN ({marks}) "
            "GROUP BY session_id",
            list(sessions),
        )
        stored, count = self._query(
            "SELECT (SELECT coalesce(max(seq), 0) FROM conversation), count(*) FROM session"
        )[0]
        return {r[0]: r[1] for r in rows}, stored / max(count, 1)

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
        lock = vars(self).setdefault("_wholes_lock", threading.Lock())
        with lock:
            names: list[str] = vars(self).setdefault("_wholes_names", [])
            number: dict[str, int] = vars(self).setdefault("_wholes_number", {})
            of_row: np.ndarray = vars(self).get("_wholes_rows", np.full(1, -1, dtype=np.int32))
            rows = self._query(
                "SELECT seq, session_id FROM conversation WHERE seq >= ? ORDER BY seq",
                (len(of_row),),
            )
            if rows:
                grown = np.full(rows[-1][0] + 1, -1, dtype=np.int32)
                grown[: len(of_row)] = of_row
                for seq, session in rows:
                    grown[seq] = number.setdefault(session, len(number))
                    if len(names) < len(number):
                        names.append(session)
                of_row = vars(self)["_wholes_rows"] = grown
            return names, of_row
