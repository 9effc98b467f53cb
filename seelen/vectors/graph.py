"""An HNSW graph of a large main table's vectors, in files beside the tables (a sidecar).

Why: at 100k turns a LanceDB vector query costs ~14 ms of CPU (IVF_SQ and its re-rank) and a
search inside named sessions ~7.5 ms (a filtered scan), while any LanceDB query costs >= 3 ms.
usearch's HNSW (f16 vectors, connectivity 16, expansion 128 / 64) answers in 0.25 ms median,
0.34 ms p95 at 100k real MiniLM vectors (recall@10 against exact 0.998; int8 codes: 0.89), as
fast from a memory-mapped file (`view`) as from memory, so a one-shot reader pays no load.

Two files per kind (`graph_files.py`), written by the one writer, each atomically, 0600:
- `<kind>.graph-<token>.usearch`: the graph of the distinct vectors (f16), one node each,
  keyed by the position of the first row that has it;
- `<kind>.graph.arrow`: the rows in position order (text_id, session_id, alive, node, digest)
  and, in its schema metadata, the main table version the files match and the graph file.
The rows file is replaced last, so it always names a complete graph file. A search uses the
sidecar only when its version is the table's current one, so correctness never depends on it:
a missing, stale or damaged sidecar costs speed (LanceDB answers), never a failed search.

One node per distinct vector, not per row: the same text said again (or the benches' borrowed
vectors) gives rows with equal vectors, and an HNSW graph full of equal nodes loses its way
(recall@10 against exact 0.89 on 100k rows of 2,000 distinct vectors; bench_recall.py
--quality through a graph of rows: R@5/R@10 .59/.70 where LanceDB gives .60/.70).

Scores are recomputed with numpy from the stored f16 vectors (as float32, unit length), so
they are cosines of those vectors: an f16 number keeps 11 bits, so a score differs from the
float32 one by at most ~1e-3 and typically ~1e-5 (tests/test_graph.py checks 2e-3). Rows
whose vectors are equal in f16 share a node, and so a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from seelen.vectors.graph_files import Rows, rows_file, unit_rows
from seelen.vectors.records import VectorHit

if TYPE_CHECKING:
    from usearch.index import Index

# A search asks the graph for `limit` + the rows it may have to drop (removed rows) + this
# margin of nodes, and again for 4x as many while too few rows remain (an excluded session).
MARGIN = 16
# Up to this many nodes a search scans every node's vector instead of walking the graph: it
# costs the same there (usearch, 384 d, 1 thread: 0.09 against 0.08 ms at 1,000 nodes, 0.13
# against 0.07 at 2,000, 1.1 against 0.15 at 20,000), and it is exact.
EXACT_NODES = 1_000


class Graph:
    """One version of a sidecar, opened read-only (memory-mapped), to search."""

    def __init__(self, index: Index, rows: Rows, meta: dict[str, str]) -> None:
        self.index = index
        self.rows = rows
        self.meta = meta
        self.version = int(meta["version"])
        self.graph_name = meta["graph"]
        self.dead = int(len(rows.alive) - int(rows.alive.sum()))

    @classmethod
    def open(cls, folder: Path, kind: str, dim: int) -> Graph | None:
        """The sidecar of `kind` in `folder`, memory-mapped; None when there is none or it
        cannot be read whole (a damaged one is left for the writer to replace)."""
        path = rows_file(folder, kind)
        if not path.is_file():
            return None
        try:
            return cls._open(folder, path, dim)
        except Exception:  # whatever a damaged file makes pyarrow or usearch raise
            return None

    @classmethod
    def _open(cls, folder: Path, path: Path, dim: int) -> Graph | None:
        import pyarrow as pa
        from usearch.index import Index

        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        graph_path = folder / meta["graph"]
        info = Index.metadata(str(graph_path))
        if (
            not info
            or int(info["dimensions"]) != dim
            or int(info["count_present"]) != int(meta["keys"])
            or graph_path.stat().st_size != int(meta["bytes"])
        ):
            return None
        rows = Rows(
            table["text_id"].combine_chunks(),
            table["session_id"].combine_chunks(),
            table["alive"].to_numpy(zero_copy_only=False).astype(bool),
            table["node"].to_numpy(zero_copy_only=False).astype(np.int64),
            table["digest"].to_numpy(zero_copy_only=False).astype(np.int64),
        )
        nodes = rows.node_of
        if len(nodes) and not 0 <= int(nodes.min()) <= int(nodes.max()) < len(nodes):
            return None
        index = Index.restore(str(graph_path), view=True)
        if index is None or len(index) != int(meta["keys"]):
            return None
        return cls(index, rows, meta)

    def __len__(self) -> int:
        return len(self.rows.alive)

    @cached_property
    def _sessions(self) -> tuple[np.ndarray, dict[str, int]]:
        """Each row's session as a number, and the number of each session (made at the first
        search of this version that names a session: ~60 ms at a million rows)."""
        encoded = self.rows.sessions.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes, {name: code for code, name in enumerate(names)}

    @cached_property
    def _by_session(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows sorted by session number (stable), and those numbers, to find a
        session's rows by bisection (a million rows: ~0.1 s once a version)."""
        codes = self._sessions[0]
        order = np.argsort(codes, kind="stable")
        return order, codes[order]

    @cached_property
    def _by_node(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows sorted by node (stable: by position within a node), and their nodes."""
        order = np.argsort(self.rows.node_of, kind="stable")
        return order, self.rows.node_of[order]

    @staticmethod
    def _rows_in(
        sorted_by: tuple[np.ndarray, np.ndarray], values: Sequence[int] | np.ndarray
    ) -> list[np.ndarray]:
        """The rows of each of `values` (nodes or session numbers), in position order."""
        order, keys = sorted_by
        starts = np.searchsorted(keys, values, side="left")
        ends = np.searchsorted(keys, values, side="right")
        return [order[a:b] for a, b in zip(starts, ends, strict=True)]

    def search(self, query: np.ndarray, limit: int, exclude_session: str | None) -> list[VectorHit]:
        """The best `limit` live rows outside `exclude_session`, best first, as found by
        the graph; asked again for more nodes while removed or excluded rows leave too few,
        up to every row scored exactly (a table hardly larger than `limit`)."""
        nodes = len(self.index)
        count = min(limit + self.dead + MARGIN, nodes)
        exact = nodes <= EXACT_NODES
        while True:
            found = self.index.search(query, count, threads=1, exact=exact).keys
            # Rows of one node tie, the older first: a node gives at most `limit` rows.
            nearest = self._rows_in(self._by_node, np.asarray(found, dtype=np.int64))
            parts = [self._eligible(rows, exclude_session)[:limit] for rows in nearest]
            rows = np.concatenate(parts) if parts else np.array([], dtype=np.int64)
            if len(rows) >= limit:
                return self._scored(query, rows, limit)
            if count >= nodes:  # the whole graph was asked for: score every row
                rows = self._eligible(np.arange(len(self)), exclude_session)
                return self._scored(query, rows, limit)
            count = min(4 * count, nodes)

    def _eligible(self, rows: np.ndarray, exclude_session: str | None) -> np.ndarray:
        """`rows` less the removed ones and those of `exclude_session`."""
        rows = rows[self.rows.alive[rows]]
        if exclude_session is not None:
            codes, code_of = self._sessions
            if (code := code_of.get(exclude_session)) is not None:
                rows = rows[codes[rows] != code]
        return rows

    def search_inside(
        self,
        query: np.ndarray,
        limit: int,
        only_sessions: Sequence[str],
        exclude_session: str | None,
    ) -> list[VectorHit]:
        """The best `limit` live rows of `only_sessions` (but `exclude_session`), scored
        exactly: every such row is read from the graph, no approximation."""
        code_of = self._sessions[1]
        wanted = {code_of[s] for s in only_sessions if s != exclude_session and s in code_of}
        parts = self._rows_in(self._by_session, sorted(wanted))
        rows = np.sort(np.concatenate(parts)) if parts else np.array([], dtype=np.int64)
        return self._scored(query, rows[self.rows.alive[rows]], limit)

    def _scored(self, query: np.ndarray, rows: np.ndarray, limit: int) -> list[VectorHit]:
        """`rows` scored against `query` from their nodes' stored vectors, the best `limit`
        first (ties, e.g. rows of one node: the older row first)."""
        if not len(rows) or limit <= 0:
            return []
        nodes, which = np.unique(self.rows.node_of[rows], return_inverse=True)
        found = self.index.get(nodes, dtype="f16")
        if not isinstance(found, tuple) or any(v is None for v in found):
            raise ValueError("a live row's node is missing from the graph file")
        vectors = unit_rows(np.stack([np.asarray(v) for v in found]))
        unit_query = query / max(float(np.linalg.norm(query)), 1e-12)
        scores = (vectors @ unit_query)[which]
        best = np.lexsort((rows, -scores))[:limit]
        ids = self.rows.ids.take(rows[best]).to_pylist()
        sessions = self.rows.sessions.take(rows[best]).to_pylist()
        return [
            VectorHit(text_id, session_id, float(scores[i]), vectors[which[i]])
            for text_id, session_id, i in zip(ids, sessions, best, strict=True)
        ]
