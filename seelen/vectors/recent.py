"""The in-memory copy of a `<kind>_recent` table, searched exactly with numpy.

Any LanceDB query costs ~3 ms however small its table, while numpy scans 5,000 rows in
~1 ms (bench/bench_vectors.py, 2 cores): this copy is why the recent table's many small
fragments cost no search time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from seelen.vectors.records import VectorHit

if TYPE_CHECKING:
    import pyarrow as pa


class RecentRows:
    """An in-memory copy of one `<kind>_recent` table.

    Writers replace `_snapshot` whole, so a search in another thread always sees one
    consistent version without taking a lock.
    """

    def __init__(self, dim: int, data: pa.Table) -> None:
        self._dim = dim
        self._rows: dict[str, tuple[str, np.ndarray]] = {}
        self._snapshot: tuple[list[str], np.ndarray, np.ndarray] = ([], np.array([]), np.array([]))
        self.upsert(data)

    def __len__(self) -> int:
        return len(self._rows)

    def upsert(self, data: pa.Table) -> None:
        """Insert or replace the rows of `data` (text_id, session_id, vector columns)."""
        flat = data["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vectors = np.asarray(flat, dtype=np.float32).reshape(-1, self._dim)
        for text_id, session_id, vector in zip(
            data["text_id"].to_pylist(), data["session_id"].to_pylist(), vectors, strict=True
        ):
            self._rows[text_id] = (session_id, vector / max(float(np.linalg.norm(vector)), 1e-12))
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
        self._snapshot = (ids, sessions, matrix)

    def search(
        self,
        vector: np.ndarray,
        limit: int,
        exclude_session: str | None,
        only_sessions: Sequence[str] | None,
    ) -> list[VectorHit]:
        """The best `limit` rows by cosine similarity, with the index's session filters."""
        ids, sessions, matrix = self._snapshot
        if not ids:
            return []
        scores = matrix @ (vector / max(float(np.linalg.norm(vector)), 1e-12))
        keep = np.ones(len(ids), dtype=bool)
        if exclude_session is not None:
            keep &= sessions != exclude_session
        if only_sessions is not None:
            keep &= np.isin(sessions, list(only_sessions))
        candidates = np.flatnonzero(keep)
        top = candidates[np.argsort(-scores[candidates], kind="stable")[:limit]]
        return [VectorHit(ids[i], sessions[i], float(scores[i]), matrix[i]) for i in top]
