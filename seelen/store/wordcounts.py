"""A cache of the word searches' counts and rows, kept while the database is unchanged."""

from __future__ import annotations

import numpy as np


class WordCounts:
    """The counts `TextSearch._rows_holding` made, kept while the database is unchanged: a
    recall asks them for the same words three times (the search of the whole memory, the
    search inside sessions, the word shares), 0.3-1 ms each time for a question's words.
    And the turn rows holding each word (`TextSearch.rows_with`): the sessions as wholes
    and the word shares each read them (0.2-0.5 ms a recall at 100k turns)."""

    LIMIT = 4096  # words kept at most (a few bytes each), then counted afresh
    # Words whose rows are kept (up to COMMON_ROWS numbers each: at most 2 MB): a few
    # questions' words, as a recall reads each word's rows twice, one after the other.
    LISTS = 128

    def __init__(self) -> None:
        self._at: tuple[int, int] = (-1, -1)
        self._counts: dict[tuple[str, str, int], int] = {}
        self.rows: dict[str, np.ndarray] = {}

    def at(self, version: tuple[int, int]) -> dict[tuple[str, str, int], int]:
        """The counts made at `version` (this connection's changes, and other connections'
        commits: `PRAGMA data_version`); none once it moved on."""
        if version != self._at or len(self._counts) > self.LIMIT:
            self._at, self._counts, self.rows = version, {}, {}
        if len(self.rows) > self.LISTS:
            self.rows = {}
        return self._counts
