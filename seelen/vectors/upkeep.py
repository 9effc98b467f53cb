"""The upkeep of a `VectorIndex`'s tables: compaction, moving the recent rows into the main
table, scalar and vector indices built when due, bulk passes that do it all once at the end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

from seelen.heap import give_back
from seelen.vectors import tables as tb
from seelen.vectors.filters import id_predicates
from seelen.vectors.graph import Graph
from seelen.vectors.graph_build import TableChange
from seelen.vectors.recent import RecentRows
from seelen.vectors.records import KINDS
from seelen.vectors.sidecar import GraphKeeper

if TYPE_CHECKING:
    from lancedb._lancedb import IndexConfig
    from lancedb.db import LanceDBConnection
    from lancedb.table import LanceTable

    from seelen.vectors.versions import WriteGate

log = logging.getLogger(__name__)

RECENT = "_recent"  # suffix of the small write table of each kind
# Whole builds of one kind in a row, while a rebuild asked meanwhile throws each away.
BUILD_TRIES = 3


class TableUpkeep:
    """What `VectorIndex` does to keep its tables fast; mixed into it."""

    max_segments: int
    index_min_rows: int
    _open_lock: threading.Lock
    _writes: dict[str, int]
    _recent: dict[str, RecentRows]
    _bulk: int
    _unmaintained: set[str]
    _graphs: GraphKeeper

    def _writing(self) -> WriteGate:
        raise NotImplementedError

    @overload
    def _table(self, name: str, *, create: Literal[True]) -> LanceTable: ...
    @overload
    def _table(self, name: str, *, create: bool = False) -> LanceTable | None: ...
    def _table(self, name: str, *, create: bool = False) -> LanceTable | None:
        raise NotImplementedError

    def _read_meta(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _write_meta(self, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    def _trained_rows(self) -> dict[str, int]:
        raise NotImplementedError

    def _connect(self) -> LanceDBConnection:
        raise NotImplementedError

    def maintain(self) -> None:
        """Compact every table and bring the indices up to date now (e.g. after a bulk
        re-index); otherwise this happens by itself as rows are added."""
        with self._writing(), tb.lance_errors("optimize"):
            self._maintain_all(rebuild=False)
        self.build_graphs()

    def build_graphs(self) -> list[str]:
        """Build the graphs that writes left due (`GraphKeeper.changed`), each from a snapshot
        of its table and with no lock held: adds and forgets go on meanwhile, and are
        replayed on the graph before it is published (`GraphKeeper.finish`). Slow for a
        large table (100k distinct vectors: 16-24 s of two cores; a million: ~13 min): call
        it off the UI. Returns the kinds built; a kind another thread builds is left to it."""
        built: list[str] = []
        for kind in KINDS if self._graphs.due else ():
            for _ in range(BUILD_TRIES):
                if (job := self._claim_build(kind)) is None:
                    break
                keeper, version, source, changes = job
                made = keeper.build(kind, source, changes)
                with self._writing():
                    main = self._table(kind) if keeper is self._graphs else None
                    done = keeper.finish(kind, made, version, len(changes), main)
                del made
                give_back()  # the graph as built: the mapped file serves searches
                if done:
                    built.append(kind)
                    break
        return built

    def _claim_build(
        self, kind: str
    ) -> tuple[GraphKeeper, int, LanceTable | Graph, list[TableChange]] | None:
        """`kind`'s due build, now taken: the keeper, the table version it starts from, what
        it starts from (the graph of that version, or a handle fixed at it: a snapshot) and
        the changes to replay while building; None when none is due (or another thread
        builds it)."""
        with self._writing(), tb.lance_errors("build graphs"):
            keeper = self._graphs
            if kind not in keeper.due or (main := self._table(kind)) is None:
                return None
            source: LanceTable | Graph | None = keeper.base(kind)
            try:
                if source is None:
                    source = self._connect().open_table(kind)
                    source.checkout(int(main.version))
            except Exception:  # a graph never fails a write: stale until the next move
                log.warning("vector index: the %s graph is left stale", kind, exc_info=True)
                keeper.give_up(kind)
                return None
            version = source.version
            changes = keeper.claim(kind)
            return None if changes is None else (keeper, int(version), source, changes)

    def _maintain_all(self, *, rebuild: bool) -> None:
        """Compact every table, index the main ones (retrain them all: `rebuild`), and bring
        their graphs to the new versions (built when missing, all anew: `rebuild`)."""
        for kind in KINDS:
            if (recent := self._table(kind + RECENT)) is not None:
                recent.optimize(cleanup_older_than=tb.KEEP_VERSIONS)
                self._writes[kind + RECENT] = 0
            if (main := self._table(kind)) is not None:
                before = main.version
                self._maintain_main(kind, main, rebuild=rebuild)
                self._graphs.changed(kind, main, before, build=True, rebuild=rebuild)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Many adds in a row (an import, a re-index): the main table is compacted and indexed
        once at the end, not at each move of the recent rows into it. Each such upkeep costs
        time in proportion to the table, so over a long import the moves cost its size
        squared: 100,000 vectors took 33 s of CPU added one move at a time (lancedb 0.40,
        load 5), and moves without upkeep grew to 40 ms of CPU per 256 at 250,000 (the
        deletes of replaced rows read the main table's unindexed ids)."""
        self._bulk += 1
        try:
            yield
        finally:
            self._bulk -= 1
            if not self._bulk and self._unmaintained:
                give_back()  # the pass's freed memory, before the upkeep's own peak
                with self._writing(), tb.lance_errors("optimize"):
                    for kind in sorted(self._unmaintained):
                        if (main := self._table(kind)) is not None:
                            self._maintain_main(kind, main)
                            # The moves were not followed: the graph is built anew, once.
                            self._graphs.changed(kind, main, -1, rebuild=True)
                    self._unmaintained.clear()
                give_back()
                self.build_graphs()

    def _move_recent(self, kind: str, recent: LanceTable) -> None:
        """Copy the recent table into the main one in a single write, then empty it."""
        data = tb.all_rows(recent)
        main = self._table(kind, create=True)
        before = main.version
        # Into main first: a search reads `recent` before `main`, so it never misses a row.
        if self._bulk:  # `add` deleted these ids from main: appending is enough
            main.add(data)
        else:
            tb.upsert(main, data)
        tb.delete_where(recent, id_predicates(data["text_id"].to_pylist()))
        self._recent[kind + RECENT].clear()
        recent.optimize(cleanup_older_than=tb.KEEP_VERSIONS)
        self._writes[kind + RECENT] = 0
        if self._bulk:
            self._unmaintained.add(kind)
            give_back()
        else:
            self._maintain_main(kind, main)
            self._graphs.changed(kind, main, before, added=data)

    def _maintain_main(self, kind: str, table: LanceTable, *, rebuild: bool = False) -> None:
        """Compact, index the moved rows; (re)build the vector index when due."""
        from lancedb.index import BTree

        table.optimize(cleanup_older_than=tb.KEEP_VERSIONS)
        rows = table.count_rows()
        indices = {i.columns[0]: i for i in table.list_indices()}
        # Scalar indices make upserts, deletes and the session filters cheap.
        for column in ("text_id", "session_id"):
            if column not in indices and rows:
                table.create_index(column, config=BTree())
        if rows >= self.index_min_rows and (
            rebuild or self._vector_index_due(kind, rows, indices.get("vector"))
        ):
            self._build_vector_index(kind, table, rows)

    def _vector_index_due(self, kind: str, rows: int, index: IndexConfig | None) -> bool:
        if index is None:
            return True
        # Each move adds a delta segment, searched one by one; a rebuild merges them.
        if (index.num_segments or 1) > self.max_segments:  # None: lancedb does not know
            return True
        # Retrain when the table has doubled, so the partitions keep fitting the data.
        return rows >= 2 * self._trained_rows().get(kind, rows)

    def _build_vector_index(self, kind: str, table: LanceTable, rows: int) -> None:
        from lancedb.index import IvfSq

        table.create_index("vector", config=IvfSq(distance_type="cosine"), replace=True)
        # With every fragment under one index again, compaction can merge them all.
        table.optimize(cleanup_older_than=tb.KEEP_VERSIONS)
        with self._open_lock:
            meta = dict(self._read_meta() or {})
            meta["trained_rows"] = {**self._trained_rows(), kind: rows}
            self._write_meta(meta)

    def rebuild_indices(self) -> None:
        """Compact every table and retrain the vector indices from scratch (`db optimize`)."""
        with self._writing(), tb.lance_errors("rebuild indices"):
            self._maintain_all(rebuild=True)
        self.build_graphs()

    def build_missing_graphs(self) -> list[str]:
        """Build the graph of each main table that should have one and has none current: a
        profile that grew past the graphs' size before they existed, or whose graph was
        damaged or removed. Otherwise such a table is searched by LanceDB until its next
        move of 5,000 rows. Returns the kinds built. Slow for a large table (100k distinct
        vectors: 16-24 s of two cores; a million: ~13 min), though writes go on meanwhile
        (`build_graphs`): the indexer's background thread runs it, never a one-shot command."""
        with self._writing(), tb.lance_errors("build graphs"):
            for kind in KINDS:
                if (main := self._table(kind)) is not None:
                    self._graphs.changed(kind, main, main.version, build=True)
        return self.build_graphs()
