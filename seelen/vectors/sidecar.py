"""`GraphKeeper`: which HNSW sidecar (`graph.py`) a search may use, and its upkeep by the writer.

The writer keeps a kind's sidecar current through every change of the main table: rows moved
in are added to the graph (load, add, save: 5,000 rows 1.7 s at 100k rows, 4 s at 300k, where
a whole build takes 16-24 s at 100k and 180 s at 300k; 2 cores at load 3.6-4.1), a delete
flags rows in the rows file only (the graph file is kept: 20-30 ms at 100k rows),
and a whole build happens when there is no current sidecar to start from (after a bulk pass,
a re-index, `rebuild_indices`, or another writer's change), or when flagged rows pass
DEAD_SHARE. A delete with no current sidecar leaves it stale: the next move rebuilds it.
At a million distinct vectors (usearch alone, load 4): a whole build takes 792 s of 2 threads
and an 874 MiB file, a move of 5,000 rows 8 s (load 0.9, add 5.4, save 1.9) and ~1.1 GiB
while the graph is loaded; the profiles of bench_scale.py borrow 2,000 vectors, so their
graphs hold ~1,100 nodes and build in 9 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from seelen.heap import give_back
from seelen.vectors import graph as gr
from seelen.vectors import graph_files as gf
from seelen.vectors.records import KINDS, VectorHit

if TYPE_CHECKING:
    import pyarrow as pa
    from lancedb.table import LanceTable
    from usearch.index import Index

log = logging.getLogger(__name__)

# Rows read from LanceDB and added at a time: 30 MB of float32 at 384 d. Building the graph of
# a million rows peaked at 2,236 MiB when read as one scan's batches (which read ahead and
# kept whole fragments), at 575 MiB by offsets (144 before it began; 1,129 distinct vectors).
BATCH_ROWS = 20_000
# Removed rows are only flagged in the rows file (the graph file stays as it is); above this
# share of the rows, the next move of rows into the table builds the graph anew without them.
DEAD_SHARE = 0.2


class GraphKeeper:
    """The sidecars of one index folder: the current one of each kind for searches (cached
    per table version), and their upkeep after each write of a main table."""

    def __init__(self, folder: Path, dim: int, graph_rows: int | None) -> None:
        self.folder = folder
        self.dim = dim
        # Main tables above this many rows get a sidecar; None: none is used or kept (the
        # tables' own search, e.g. to compare with).
        self.graph_rows = graph_rows
        self._seen: dict[str, tuple[int, gr.Graph | None]] = {}
        self.answered = 0  # searches the graphs answered (for tests and benches)
        self._lock = threading.Lock()

    def current(self, kind: str, version: int) -> gr.Graph | None:
        """The sidecar of `kind` matching table version `version`, or None (search LanceDB).
        Opened once per version; a miss is remembered for that version too."""
        if self.graph_rows is None:
            return None
        seen = self._seen.get(kind)
        if seen is not None and seen[0] == version:
            return seen[1]
        with self._lock:
            seen = self._seen.get(kind)  # the writer may have published it meanwhile
            if seen is not None and seen[0] == version:
                return seen[1]
            graph = gr.Graph.open(self.folder, kind, self.dim)
            if graph is not None and graph.version != version:
                graph = None
            self._seen[kind] = (version, graph)
        return graph

    def search(
        self,
        kind: str,
        version: int,
        query: np.ndarray,
        limit: int,
        exclude_session: str | None,
        only_sessions: Sequence[str] | None,
    ) -> list[VectorHit] | None:
        """`VectorIndex.search` of table version `version` through its sidecar; None when
        there is no current one or it fails to answer (search LanceDB instead)."""
        if (graph := self.current(kind, version)) is None:
            return None
        try:
            if only_sessions is not None:
                hits = graph.search_inside(query, limit, only_sessions, exclude_session)
            else:
                hits = graph.search(query, limit, exclude_session)
        except (OSError, RuntimeError, ValueError):  # a damaged file: LanceDB answers
            return None
        self.answered += 1
        return hits

    def changed(
        self,
        kind: str,
        main: LanceTable,
        before: int,
        *,
        added: pa.Table | None = None,
        removed_ids: Collection[str] = (),
        removed_session: str | None = None,
        build: bool = False,
        rebuild: bool = False,
    ) -> None:
        """Bring `kind`'s sidecar to `main`'s version after the writer changed the table from
        version `before` by adding `added` and deleting `removed_ids` / `removed_session`;
        with no current sidecar to change, one is built for a move (`added`) or when asked
        (`build`: also when the table did not change), else left stale; `rebuild` builds one
        anew in any case. Failures leave the sidecar stale (searches then use LanceDB),
        never fail the write."""
        version = int(main.version)
        if self.graph_rows is None:
            return
        if (
            version == before
            and not rebuild
            and not (build and self.current(kind, version) is None)
        ):
            return
        graph = self.current(kind, before)
        try:
            rows = int(main.count_rows())
            if rows <= self.graph_rows:
                if graph is not None or gf.rows_file(self.folder, kind).exists():
                    self._drop(kind)
                return
            if graph is not None and not rebuild and (added is None or not self._worn(graph)):
                fresh = self._update(kind, graph, version, added, removed_ids, removed_session)
            elif added is not None or build or rebuild:
                fresh = self._build(kind, main, version)
            else:  # a delete with no current sidecar: left stale until the next move
                return
        except Exception:  # disk full, a damaged file, a library's error: no sidecar
            log.warning("vector index: the %s graph is left stale", kind, exc_info=True)
            with self._lock:
                self._seen.pop(kind, None)
            return
        with self._lock:
            self._seen[kind] = (version, fresh)

    def forget(self) -> None:
        """Close the open graphs (their mapped pages and row arrays: ~60 MB at a million
        rows); a search opens the current one again (~0.2 s at a million rows)."""
        with self._lock:
            self._seen.clear()

    def drop_all(self) -> None:
        """Delete every sidecar (the tables are dropped: a new table's versions count from
        1 again, and an old sidecar could match one by its number)."""
        for kind in KINDS:
            self._drop(kind)

    def _worn(self, graph: gr.Graph) -> bool:
        return graph.dead > DEAD_SHARE * len(graph)

    def _drop(self, kind: str) -> None:
        gf.rows_file(self.folder, kind).unlink(missing_ok=True)
        gf.remove_stale(self.folder, kind, keep=None)
        with self._lock:
            self._seen.pop(kind, None)

    def _build(self, kind: str, main: LanceTable, version: int) -> gr.Graph | None:
        """A whole new sidecar from every row of `main`, read in batches."""
        import pyarrow as pa

        index = gf.new_graph(self.dim)
        nodes = _Nodes({}, 0)
        parts: list[gf.Rows] = []
        total = int(main.count_rows())
        for start in range(0, total, BATCH_ROWS):  # offsets read only their rows: a scan's
            offsets = list(range(start, min(total, start + BATCH_ROWS)))  # batches read ahead
            batch = main.take_offsets(offsets).select(["text_id", "session_id", "vector"])
            parts.append(nodes.add(index, batch.to_arrow(), self.dim))
        if not parts:
            empty = pa.array([], pa.string())
            parts.append(
                gf.Rows(empty, empty, *(np.array([], t) for t in (bool, np.int64, np.int64)))
            )
        return self._publish(kind, index, _joined(parts), version)

    def _update(
        self,
        kind: str,
        graph: gr.Graph,
        version: int,
        added: pa.Table | None,
        removed_ids: Collection[str],
        removed_session: str | None,
    ) -> gr.Graph | None:
        """The next version of `graph`: removed rows flagged; added rows (a move) put in
        the graph, which is then loaded, changed and saved whole."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = graph.rows
        gone = set(removed_ids) | set(added["text_id"].to_pylist() if added is not None else [])
        alive = rows.alive.copy()
        if gone:
            found = pc.is_in(rows.ids, value_set=pa.array(list(gone), pa.string()))
            alive &= ~found.to_numpy(zero_copy_only=False)
        if removed_session is not None:
            alive &= ~pc.equal(rows.sessions, removed_session).to_numpy(zero_copy_only=False)
        kept = gf.Rows(rows.ids, rows.sessions, alive, rows.node_of, rows.digest)
        if added is None:  # a delete: the same graph file, its rows flagged
            gf.write_rows(self.folder, kind, kept, graph.meta | {"version": version})
            return gr.Graph.open(self.folder, kind, self.dim)
        from usearch.index import Index

        index = Index.restore(str(self.folder / graph.graph_name), view=False)
        if index is None:
            raise ValueError("unreadable graph file")
        live = np.zeros(len(alive), dtype=bool)
        live[rows.node_of[alive]] = True
        index.remove(np.flatnonzero(~live))  # nodes of removed rows only; absent keys: skipped
        first = dict(zip(rows.digest[alive].tolist(), rows.node_of[alive].tolist(), strict=True))
        more = _Nodes(first, len(alive)).add(index, added, self.dim)
        return self._publish(kind, index, _joined([kept, more]), version)

    def _publish(self, kind: str, index: Index, rows: gf.Rows, version: int) -> gr.Graph | None:
        """Save `index` and its rows as the sidecar of `version`, then open it mapped."""
        name, size = gf.save_graph(self.folder, kind, index)
        meta = {"version": version, "graph": name, "bytes": size, "keys": len(index)}
        del index
        give_back()  # the graph as built or loaded: the mapped file serves searches
        gf.write_rows(self.folder, kind, rows, meta)
        gf.remove_stale(self.folder, kind, keep=name)
        return gr.Graph.open(self.folder, kind, self.dim)


class _Nodes:
    """Rows given nodes in order: a row whose vector (digest) a node already holds joins
    it, any other row becomes a node keyed by its position."""

    def __init__(self, first: dict[int, int], start: int) -> None:
        self.first = first  # digest -> node key
        self.start = start  # the position of the next row

    def add(self, index: Index, data: pa.Table | pa.RecordBatch, dim: int) -> gf.Rows:
        """Put `data`'s rows with new vectors in `index`; returns the rows as stored."""
        vectors = gf.vectors_of(data, dim)
        digest = gf.digests(vectors)
        keys = np.arange(self.start, self.start + len(digest), dtype=np.int64)
        node_of = np.array(
            [
                self.first.setdefault(d, k)
                for d, k in zip(digest.tolist(), keys.tolist(), strict=True)
            ],
            dtype=np.int64,
        )
        new = node_of == keys
        if new.any():
            index.add(keys[new], vectors[new])
        self.start += len(digest)
        ids, sessions = data["text_id"], data["session_id"]
        if hasattr(ids, "combine_chunks"):
            ids, sessions = ids.combine_chunks(), sessions.combine_chunks()
        return gf.Rows(ids, sessions, np.ones(len(digest), dtype=bool), node_of, digest)


def _joined(parts: list[gf.Rows]) -> gf.Rows:
    import pyarrow as pa

    return gf.Rows(
        pa.concat_arrays([p.ids for p in parts]),
        pa.concat_arrays([p.sessions for p in parts]),
        np.concatenate([p.alive for p in parts]),
        np.concatenate([p.node_of for p in parts]),
        np.concatenate([p.digest for p in parts]),
    )
