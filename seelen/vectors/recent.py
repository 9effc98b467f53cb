"""The in-memory copy of a `<kind>_recent` table, searched exactly with numpy.

Any LanceDB query costs ~3 ms however small its table, while numpy scans 5,000 rows in
~1 ms (bench/bench_vectors.py, 2 cores): this copy is why the recent table's many small
fragments cost no search time. The same class holds a copy of a small main table
(`VectorIndex._held_copy`): 20,000 rows are searched in ~1.5 ms, the best found in linear
time (a full sort of the scores took as long as the scoring).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from seelen.vectors.records import VectorHit

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class _Snapshot:
    """One version of the rows: their ids, sessions and unit vectors, row by row."""

    ids: list[str] = field(default_factory=list)
    sessions: np.ndarray = field(default_factory=lambda: np.array([], dtype=object))
    matrix: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.float32))

    @cached_property
    def rows_of(self) -> dict[str, list[int]]:
        """The rows of each session, made at the first search inside sessions of a copy that
        never changes (20,000 rows: 3 ms once, then a lookup instead of a 0.7-1.4 ms scan of
        every row's session; the recent rows change at every write and scan instead)."""
        out: dict[str, list[int]] = {}
        for row, session in enumerate(self.sessions):
            out.setdefault(session, []).append(row)
        return out

    def rows_in(self, sessions: Sequence[str]) -> np.ndarray:
        """The rows of `sessions`, in the order they were added."""
        found = [row for s in dict.fromkeys(sessions) for row in self.rows_of.get(s, [])]
        return np.array(sorted(found), dtype=np.intp)


class RecentRows:
    """An in-memory copy of one `<kind>_recent` table.

    Writers replace `_snapshot` whole, so a search in another thread always sees one
    consistent version without taking a lock.
    """

    def __init__(self, dim: int, data: pa.Table) -> None:
        self._dim = dim
        self._rows: dict[str, tuple[str, np.ndarray]] = {}
        self._snapshot = _Snapshot()
        self._fixed = False  # a read-only copy (`copy_of`): its rows never change
        self.upsert(data)

    @classmethod
    def copy_of(cls, dim: int, data: pa.Table) -> RecentRows:
        """A read-only copy of `data`'s rows (a small main table's): the search's matrix
        alone, without the map of rows that writes keep (which would hold each vector twice)."""
        copy = cls(dim, data.slice(0, 0))
        copy._fixed = True
        sessions = np.array(data["session_id"].to_pylist(), dtype=object)
        copy._snapshot = _Snapshot(data["text_id"].to_pylist(), sessions, _unit_rows(data, dim))
        return copy

    def __len__(self) -> int:
        return len(self._snapshot.ids)

    def upsert(self, data: pa.Table) -> None:
        """Insert or replace the rows of `data` (text_id, session_id, vector columns)."""
        vectors = _unit_rows(data, self._dim)
        for text_id, session_id, vector in zip(
            data["text_id"].to_pylist(), data["session_id"].to_pylist(), vectors, strict=True
        ):
            self._rows[text_id] = (session_id, vector)
        self._publish()

    def delete(self, text_ids: set[str], session_id: str | None) -> None:
        """Drop rows with one of `text_ids` or of `session_id`."""
        for text_id, (session, _) in list(self._rows.items()):
            if text_id in text_ids or session == session_id:
                del self._rows[text_id]
        self._publish()

    def clear(self) -> None:
        """Drop every row (they moved to the main table)."""
        self._rows.clear()
        self._publish()

    def _publish(self) -> None:
        ids = list(self._rows)
        sessions = np.array([self._rows[i][0] for i in ids], dtype=object)
        matrix = np.array([self._rows[i][1] for i in ids], dtype=np.float32).reshape(-1, self._dim)
        self._snapshot = _Snapshot(ids, sessions, matrix)

    def search(
        self,
        vector: np.ndarray,
        limit: int,
        exclude_session: str | None,
        only_sessions: Sequence[str] | None,
    ) -> list[VectorHit]:
        """The best `limit` rows by cosine similarity, with the index's session filters."""
        snapshot = self._snapshot
        ids, sessions, matrix = snapshot.ids, snapshot.sessions, snapshot.matrix
        if not ids or limit <= 0:
            return []
        query = vector / max(float(np.linalg.norm(vector)), 1e-12)
        if only_sessions is not None:  # a few sessions: score only their rows
            if self._fixed:
                rows = snapshot.rows_in(only_sessions)
            else:
                rows = np.flatnonzero(np.isin(sessions, list(only_sessions)))
        else:
            rows = np.arange(len(ids))
        if exclude_session is not None:
            rows = rows[sessions[rows] != exclude_session]
        scores = matrix[rows] @ query if only_sessions is not None else (matrix @ query)[rows]
        if len(rows) > limit:  # the best `limit` in linear time, then only those sorted
            best = np.argpartition(-scores, limit - 1)[:limit]
        else:
            best = np.arange(len(rows))
        best = best[np.lexsort((rows[best], -scores[best]))]  # ties: the order rows were added
        return [
            VectorHit(ids[i], sessions[i], float(score), matrix[i])
            for i, score in zip(rows[best], scores[best], strict=True)
        ]


def _unit_rows(data: pa.Table, dim: int) -> np.ndarray:
    """`data`'s vector column as a float32 matrix of unit rows (one copy, scaled in place)."""
    flat = data["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = np.array(flat, dtype=np.float32).reshape(-1, dim)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return matrix
