"""`GraphKeeper`: which HNSW sidecar (`graph.py`) a search may use, and its upkeep by the writer.

The writer keeps a kind's sidecar current through every change of the main table: rows moved
in are added to the graph (load, add, save: 5,000 rows 1.7 s at 100k rows, 4 s at 300k, where
a whole build takes 16-24 s at 100k and 180 s at 300k; 2 cores at load 3.6-4.1), a delete
flags rows in the rows file only (the graph file is kept: 20-30 ms at 100k rows),
and a whole build is due when there is no current sidecar to start from (after a bulk pass,
a re-index, `rebuild_indices`, or another writer's change), or when flagged rows pass
DEAD_SHARE. A delete with no current sidecar leaves it stale: the next move rebuilds it.
A whole build, and a move's growth, run with no lock held (`VectorIndex.build_graphs`),
from a snapshot of the table or from the graph of the version before the move: the writer's
changes meanwhile are kept and replayed on it, and it is published for the table's version
they reach, or thrown away if the table changed in a way not kept (another writer); so a
forget never waits for a build, and a row it deleted is never found through a graph.
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

from seelen.vectors import graph as gr
from seelen.vectors import graph_files as gf
from seelen.vectors.graph_build import Built, TableChange, build_whole, flagged, replayed
from seelen.vectors.records import KINDS, VectorHit

if TYPE_CHECKING:
    import pyarrow as pa
    from lancedb.table import LanceTable

log = logging.getLogger(__name__)

# Removed rows are only flagged in the rows file (the graph file stays as it is); above this
# share of the rows, the next move of rows into the table builds the graph anew without them.
DEAD_SHARE = 0.2


class GraphKeeper:
    """The sidecars of one index folder: the current one of each kind for searches (cached
    per table version), and their upkeep after each write of a main table. Every method but
    `current`, `search` and `build` runs under the index's write lock."""

    def __init__(self, folder: Path, dim: int, graph_rows: int | None) -> None:
        self.folder = folder
        self.dim = dim
        # Main tables above this many rows get a sidecar; None: none is used or kept (the
        # tables' own search, e.g. to compare with).
        self.graph_rows = graph_rows
        self._seen: dict[str, tuple[int, gr.Graph | None]] = {}
        self.answered = 0  # searches the graphs answered (for tests and benches)
        self._lock = threading.Lock()
        self.due: set[str] = set()  # kinds whose graph waits for `build_graphs`
        # Kinds due or being built: the changes since the version the build starts from, to
        # replay on it (None: a rebuild was asked meanwhile: thrown away, and due again).
        self._building: dict[str, list[TableChange] | None] = {}
        self._bases: dict[str, gr.Graph] = {}  # a due graph that grows from the current one
        self._claimed: set[str] = set()  # kinds a thread builds now

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
        version `before` by adding `added` and deleting `removed_ids` / `removed_session`.
        A delete flags the current sidecar's rows at once. A move makes the current one due
        to grow (`build_graphs`: loaded, added to, saved whole, with no lock held); with no
        current sidecar (or one worn by deletes) a whole build is due for a move or when
        asked (`build`: also when the table did not change), else it is left stale;
        `rebuild` makes one due in any case. While one is due or built, the change is kept
        for it. Failures leave the sidecar stale (searches then use LanceDB), never fail
        the write."""
        version = int(main.version)
        if self.graph_rows is None:
            return
        if kind in self._building:  # replayed on the build under way (`finish`)
            journal = self._building[kind]
            if rebuild or journal is None:
                self._building[kind] = None
            elif version != before:
                change = TableChange(before, version, added, tuple(removed_ids), removed_session)
                journal.append(change)
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
            if graph is not None and not rebuild and added is None:
                fresh = self._update(kind, graph, version, removed_ids, removed_session)
            elif graph is not None and not rebuild and not self._worn(graph):
                # A move: the graph grows off the lock, from its version (`build_graphs`).
                change = TableChange(before, version, added, tuple(removed_ids), removed_session)
                self.due.add(kind)
                self._bases[kind], self._building[kind] = graph, [change]
                return
            else:
                if added is not None or build or rebuild:  # a move without a base, or asked
                    self.due.add(kind)
                return  # stale until then (a delete: until the next move)
        except Exception:  # disk full, a damaged file, a library's error: no sidecar
            log.warning("vector index: the %s graph is left stale", kind, exc_info=True)
            with self._lock:
                self._seen.pop(kind, None)
            return
        with self._lock:
            self._seen[kind] = (version, fresh)

    def base(self, kind: str) -> gr.Graph | None:
        """The graph `kind`'s due build grows from (a move's), or None: a whole build."""
        return self._bases.get(kind) if self._building.get(kind) is not None else None

    def claim(self, kind: str) -> list[TableChange] | None:
        """Take `kind`'s due build; None when none is due, or another thread builds it.
        Returns the changes to replay while building (a move on its `base`); from now on
        the table's further changes are kept for `finish`."""
        if kind not in self.due or kind in self._claimed:
            return None
        self.due.discard(kind)
        self._claimed.add(kind)
        if self.base(kind) is None:  # a whole build, from a snapshot of the table as it is
            self._bases.pop(kind, None)
            self._building[kind] = []
        return list(self._building[kind] or [])

    def give_up(self, kind: str) -> None:
        """Drop `kind`'s due build, which could not start: stale until the next move."""
        self.due.discard(kind)
        if kind not in self._claimed:
            self._building.pop(kind, None)
            self._bases.pop(kind, None)

    def build(
        self, kind: str, source: LanceTable | gr.Graph, changes: list[TableChange]
    ) -> Built | None:
        """The graph of every row of `source` (a snapshot of the table), or `source` (the
        graph of an older version) through `changes`, saved to its own file (published by
        `finish`); None when that failed. Slow, and holds no lock."""
        try:
            if isinstance(source, gr.Graph):
                from usearch.index import Index

                index = Index.restore(str(self.folder / source.graph_name), view=False)
                if index is None:
                    raise ValueError("unreadable graph file")
                built = replayed(Built(index, source.rows), changes, self.dim)
            else:
                built = build_whole(source, self.dim)
            built.saved = gf.save_graph(self.folder, kind, built.index)[0]
            return built
        except Exception:  # disk full, a table version cleaned up, a library's error
            log.warning("vector index: building the %s graph failed", kind, exc_info=True)
            return None

    def finish(
        self, kind: str, built: Built | None, version: int, done: int, main: LanceTable | None
    ) -> bool:
        """Publish `built` (made from table version `version` and the first `done` changes
        kept since) for `main`'s version, with the later changes replayed on it; or throw it
        away when the build failed, a rebuild was asked meanwhile (then it is due again), or
        the table changed in a way not kept (another writer). True when published."""
        journal = self._building.pop(kind)
        self._claimed.discard(kind)
        self._bases.pop(kind, None)
        if journal is None:
            self.due.add(kind)
        try:
            ready = None
            if built is not None and journal is not None and main is not None:
                ready = self._caught_up(built, version, journal, done, main)
            if ready is None:
                if built is not None and built.saved:
                    (self.folder / built.saved).unlink(missing_ok=True)
                return False
            version, built = ready
            fresh = self._publish(kind, built, version)
        except Exception:  # disk full, a damaged file, a library's error: no sidecar
            log.warning("vector index: the %s graph is left stale", kind, exc_info=True)
            with self._lock:
                self._seen.pop(kind, None)
            return False
        with self._lock:
            self._seen[kind] = (version, fresh)
        return fresh is not None

    def _caught_up(
        self, built: Built, version: int, journal: list[TableChange], done: int, main: LanceTable
    ) -> tuple[int, Built] | None:
        """`built` through the kept changes after the first `done`, and the table version
        they reach: None unless they all lead unbroken from `version` to `main`'s, and the
        table still wants a graph."""
        for change in journal:
            if change.before != version:
                return None
            version = change.after
        if version != int(main.version) or int(main.count_rows()) <= (self.graph_rows or 0):
            return None
        return version, replayed(built, journal[done:], self.dim)

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

    def _update(
        self,
        kind: str,
        graph: gr.Graph,
        version: int,
        removed_ids: Collection[str],
        removed_session: str | None,
    ) -> gr.Graph | None:
        """The next version of `graph` after a delete: the same graph file, its rows
        flagged (20-30 ms at 100k rows)."""
        kept = flagged(graph.rows, removed_ids, removed_session)
        gf.write_rows(self.folder, kind, kept, graph.meta | {"version": version})
        return gr.Graph.open(self.folder, kind, self.dim)

    def _publish(self, kind: str, built: Built, version: int) -> gr.Graph | None:
        """Save `built` (unless saved already) and its rows as the sidecar of `version`, then
        open it mapped."""
        name = built.saved or gf.save_graph(self.folder, kind, built.index)[0]
        size = (self.folder / name).stat().st_size
        meta = {"version": version, "graph": name, "bytes": size, "keys": len(built.index)}
        gf.write_rows(self.folder, kind, built.rows, meta)
        gf.remove_stale(self.folder, kind, keep=name)
        return gr.Graph.open(self.folder, kind, self.dim)
