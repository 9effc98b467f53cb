"""`VectorIndex`: the LanceDB tables of one profile, their model record, and their upkeep.

The design (two tables per kind, why, and the numbers) is in the package docstring.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from seelen.errors import StoreError
from seelen.heap import give_back
from seelen.vectors import folders
from seelen.vectors import tables as tb
from seelen.vectors.filters import id_predicates, session_filter, sql_string
from seelen.vectors.meta import META_FILE, ModelRecord
from seelen.vectors.recent import RecentRows
from seelen.vectors.records import KINDS, VectorHit, VectorRow, check_kind
from seelen.vectors.sidecar import GraphKeeper
from seelen.vectors.swaps import IndexSwaps
from seelen.vectors.upkeep import RECENT, TableUpkeep
from seelen.vectors.versions import TableVersions, WriteGate

if TYPE_CHECKING:
    from lancedb.db import LanceDBConnection
    from lancedb.table import LanceTable

INDEX_MIN_ROWS = 5_000  # below this a flat search of the main table stays under ~8 ms
RECENT_ROWS = 5_000  # rows kept in memory as well (7.5 MB at 384 dims) before a move
# A main table of at most this many rows is searched in a copy in memory (`_held`), exactly:
# any LanceDB query on it costs 11-13 ms of CPU at this machine's load of 2-4 (even 5,000
# summaries with their IVF index: bench_vectors.py), numpy's scan of 20,000 rows ~3 ms.
# Chosen by memory: 30 MB a table at 384 dims, so a 20,000-turn profile (the size of a
# heavy ChatGPT history) searches everything in memory, and at 100k turns only the
# summaries (one a session) are held.
HELD_ROWS = 20_000
# A main table above this many rows is searched in its HNSW graph (`graph.py`) when the graph
# is current: the tables no held copy keeps. None: LanceDB's own search, no graph file.
GRAPH_ROWS = HELD_ROWS
# Searches of one table version before its copy is made: a recall searches one kind at most
# three times (everywhere, inside the summaries' sessions, inside a named time), so a
# command that asks once (a one-shot `ask` or `memory search`) never pays for the copy
# (0.15-0.3 s at 20,000 rows); a process that goes on asking (the owner, a chat, a batch)
# makes it during its second question.
HELD_AFTER = 4
OPTIMIZE_EVERY = 50  # writes between compactions of the recent table
MAX_SEGMENTS = 1  # index segments (1 + deltas) tolerated before a rebuild


class VectorIndex(TableUpkeep, IndexSwaps):
    """The vectors of turns and summaries, searched by cosine similarity.

    Opens lazily and is safe to share between threads: writes are serialised, searches do
    not wait for them. `search` promises, for both kinds and whatever the table size: hits
    come best first, and a higher score means more similar. While the stored vectors belong
    to another model (`compatible()` is False) every method but `reset` raises `StoreError`.
    Read-only (a reader): writes raise `StoreError`; a missing folder is an empty index,
    not created; tables are read as first opened (reopen to see what a writer added).
    """

    def __init__(
        self,
        path: Path,
        model_id: str,
        dim: int,
        *,
        index_min_rows: int = INDEX_MIN_ROWS,
        recent_rows: int = RECENT_ROWS,
        held_rows: int = HELD_ROWS,
        graph_rows: int | None = GRAPH_ROWS,
        optimize_every: int = OPTIMIZE_EVERY,
        max_segments: int = MAX_SEGMENTS,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.model_id = model_id
        self.dim = dim
        self.index_min_rows = index_min_rows
        self.recent_rows = recent_rows
        self.held_rows = held_rows
        self.graph_rows = graph_rows
        self.optimize_every = optimize_every
        self.max_segments = max_segments
        self._open_lock = threading.Lock()  # short: opening tables, the meta cache
        self._write_lock = WriteGate()  # long: writes and maintenance
        self._forget_handles()

    def _forget_handles(self) -> None:
        """Drop every open table and cached fact, so the next call reads the folder again."""
        self._db: LanceDBConnection | None = None
        self._tables: dict[str, LanceTable] = {}
        self._absent: set[str] = set()  # names of tables known not to exist
        self._recent: dict[str, RecentRows] = {}  # in-memory copies of the recent tables
        # Per kind: the main table handle and version seen, searches of it since, and its copy
        # in memory once made (see `_held_copy`).
        self._held: dict[str, tuple[LanceTable, int, int, RecentRows | None]] = {}
        self._writes: dict[str, int] = {}
        self._record = ModelRecord(self.path / META_FILE)
        self._bulk = 0  # nested `bulk()` calls under way
        self._unmaintained: set[str] = set()  # kinds moved during a bulk, not yet maintained
        self._graphs = GraphKeeper(self.path, self.dim, self.graph_rows)
        self._versions = TableVersions(self._write_lock)  # the main tables' (versions.py)

    # -- the embedding model's record -----------------------------------------------------

    def compatible(self) -> bool:
        """False when the stored vectors come from another model id or size (re-index), or
        when the folder cannot be read as an index at all."""
        with self._open_lock:
            try:
                return self._compatible_locked()
            except (OSError, RuntimeError, ValueError, StoreError):
                return False

    def _compatible_locked(self) -> bool:
        meta = self._read_meta()
        if meta is None:  # no record: fine only when nothing is stored yet
            if not any(self._exists(k + s) for k in KINDS for s in ("", RECENT)):
                return True
            # A writer records its model before its first table: read again, in case it
            # did so between the two looks.
            meta = self._read_meta()
            if meta is None:
                return False
        return meta.get("model_id") == self.model_id and meta.get("dim") == self.dim

    def stored_model(self) -> str | None:
        """The model id recorded beside the vectors, or None when there is no readable one."""
        with self._open_lock:
            model = (self._read_meta() or {}).get("model_id")
        return model if isinstance(model, str) else None

    def reset(self) -> None:
        """Drop every vector and record this index's model id (before a re-index)."""
        with self._writing(), self._open_lock, tb.lance_errors("reset"):
            if folders.present(self.path) and not self.path.is_dir():
                folders.move_aside(self.path, "damaged")  # e.g. a file where the folder belongs
            db = self._connect()
            for kind in KINDS:
                db.drop_table(kind, ignore_missing=True)
                db.drop_table(kind + RECENT, ignore_missing=True)
            self._graphs.drop_all()
            self._forget_handles()
            self._write_meta({"model_id": self.model_id, "dim": self.dim, "trained_rows": {}})

    def _read_meta(self) -> dict[str, Any] | None:
        return self._record.read()

    def _write_meta(self, meta: dict[str, Any]) -> None:
        self._record.write(meta)

    def _trained_rows(self) -> dict[str, int]:
        return self._record.trained_rows()

    # -- tables -------------------------------------------------------------------------

    def _writing(self) -> WriteGate:
        """The write lock; an index opened read-only refuses every write."""
        if self.read_only:
            raise StoreError(f"vector index {self.path} is open read-only")
        return self._write_lock

    def _connect(self) -> LanceDBConnection:
        if self._db is None:
            self._db = tb.connect(self.path)
        return self._db

    def _exists(self, name: str) -> bool:
        if self.read_only and not self.path.is_dir():  # connecting would create the folder
            return False
        if self._db is None and not folders.present(self.path):
            # Nothing stored yet (a new profile): no table, and no need to load LanceDB to
            # say so (0.4 s of CPU in every process that opens a new profile's index).
            return False
        if name in self._tables:
            return True
        # LanceDB lists the `<name>.lance` folders: none, no table, and no hand-off to its
        # event loop (0.13-0.41 ms) at every search of a reader's absent table.
        listed = folders.present(self.path / f"{name}.lance")
        return listed and name in self._connect().list_tables().tables

    @overload
    def _table(self, name: str, *, create: Literal[True]) -> LanceTable: ...
    @overload
    def _table(self, name: str, *, create: bool = False) -> LanceTable | None: ...
    def _table(self, name: str, *, create: bool = False) -> LanceTable | None:
        """The open table `name`; None if it does not exist and `create` is False."""
        with self._open_lock:
            if name in self._tables:
                return self._tables[name]
            if name in self._absent and not create:
                return None
            if not self._compatible_locked():
                raise StoreError(
                    f"vector index {self.path} holds vectors of another embedding model "
                    "or cannot be read; the indexer rebuilds it (or: seelen db repair)"
                )
            exists = self._exists(name)
            if not exists and not create:
                if not self.read_only:  # only a writer creates tables: it may remember an
                    self._absent.add(name)  # absence, sparing each search a listing
                return None
            db = self._connect()
            if exists:
                table = db.open_table(name)
            else:
                self._writing()  # a reader never creates a table
                if self._read_meta() is None:  # the record first: another process reading
                    # between the two would find a table with no record, "another model's"
                    self._write_meta({"model_id": self.model_id, "dim": self.dim})
                table = db.create_table(name, schema=tb.schema(self.dim))
            self._absent.discard(name)
            # Fragments left by earlier writes count as writes not yet compacted.
            # stats() returns a dict at run time, though its stub declares a dataclass.
            stats = table.stats()["fragment_stats"]  # type: ignore[index]
            self._writes[name] = int(stats["num_fragments"])
            if name.endswith(RECENT):  # loaded before any write through this object
                self._recent[name] = RecentRows(self.dim, tb.all_rows(table))
            self._tables[name] = table
            return table

    def _pair(self, kind: str) -> list[LanceTable]:
        """The existing tables of `kind`, the recent one first (see `search`)."""
        return [t for t in (self._table(kind + RECENT), self._table(kind)) if t is not None]

    def _recent_rows(self, kind: str) -> RecentRows | None:
        """The in-memory copy of `kind`'s recent table, if that table exists."""
        if self._table(kind + RECENT) is None:
            return None
        # Absent only when a swap or a move aside dropped the handles just now: no rows yet.
        return self._recent.get(kind + RECENT)

    def _held_copy(self, kind: str, main: LanceTable, version: int) -> RecentRows | None:
        """A copy in memory of `kind`'s main table while it holds at most `held_rows` rows
        (see HELD_ROWS), made at the HELD_AFTER-th search of a table version and made again
        after the table changed (a move, a forget, a re-index); None before that and for a
        larger table. Read after the recent rows, as the table itself is, so a search never
        misses a row that moves meanwhile."""
        table, seen, searches, copy = self._held.get(kind, (None, -1, 0, None))
        if table is not main or seen != version:
            searches, copy = 0, None
        searches += 1
        if copy is None and searches == HELD_AFTER and main.count_rows() <= self.held_rows:
            copy = RecentRows.copy_of(self.dim, tb.all_rows(main))
            give_back()  # the table as read (as large as the copy) is gone: return its pages
        self._held[kind] = (main, version, searches, copy)
        return copy

    def release(self) -> None:
        """Drop the in-memory copies of the main tables and the open graphs (an idle
        process); the next search makes or opens them again."""
        self._held = {}
        self._graphs.forget()

    # -- writes ------------------------------------------------------------------------

    def add(self, kind: str, rows: Sequence[VectorRow], *, build: bool = True) -> None:
        """Insert or replace rows by `text_id`; adding a text id again keeps one row.

        Usually a few milliseconds; a call that moves the recent table into the main one
        can take seconds (its rows are searchable before that starts): call it off the UI.
        A whole graph build the move calls for runs after the write, with no lock held
        (`build_graphs`); `build=False` leaves it to the caller's own `build_graphs`.
        """
        check_kind(kind)
        if not rows:
            return
        data = tb.to_arrow(rows, self.dim)
        with self._writing(), tb.lance_errors(f"add {kind}"):
            recent = self._table(kind + RECENT, create=True)
            tb.upsert(recent, data)
            self._recent[kind + RECENT].upsert(data)
            main = self._table(kind)
            if main is not None:  # a new version of a text already moved to the main table
                before, ids = main.version, data["text_id"].to_pylist()
                tb.delete_where(main, id_predicates(ids))
                self._graphs.changed(kind, main, before, removed_ids=ids)
            self._after_write(kind, recent)
        if build and self._graphs.due:
            self.build_graphs()

    def delete(
        self, kind: str, *, text_ids: Sequence[str] = (), session_id: str | None = None
    ) -> int:
        """Delete rows with any of `text_ids` and every row of `session_id`; returns how many.

        Given neither, nothing is deleted.
        """
        check_kind(kind)
        if isinstance(text_ids, str):
            raise TypeError("text_ids must be a sequence of ids, not one string")
        predicates = id_predicates(list(dict.fromkeys(text_ids)))
        if session_id is not None:
            predicates.append(f"session_id = {sql_string(session_id)}")
        if not predicates:
            return 0
        with self._writing(), tb.lance_errors(f"delete {kind}"):
            recent, main = self._table(kind + RECENT), self._table(kind)
            deleted = tb.delete_where(recent, predicates) if recent is not None else 0
            if (rows := self._recent_rows(kind)) is not None:
                rows.delete(set(text_ids), session_id)
            if main is not None:
                before = main.version
                deleted += tb.delete_where(main, predicates)
                self._graphs.changed(
                    kind, main, before, removed_ids=text_ids, removed_session=session_id
                )
            return deleted

    def _after_write(self, kind: str, recent: LanceTable) -> None:
        name = kind + RECENT
        self._writes[name] += 1
        if len(self._recent[name]) >= self.recent_rows:
            self._move_recent(kind, recent)
        elif self._writes[name] >= self.optimize_every:
            # Without an index this merges all the one-write fragments into one.
            recent.optimize(cleanup_older_than=tb.KEEP_VERSIONS)
            self._writes[name] = 0

    def warm(self) -> None:
        """Import LanceDB and open the tables now (e.g. in a background thread at start-up),
        so the first search does not wait for them. The vector indices are not loaded whole:
        a search reads the partitions it probes, kept in a bounded cache (`tables.connect`);
        a million turns' index whole held 450 MiB more for no faster search."""
        with tb.lance_errors("open tables"):
            for kind in KINDS:
                self._pair(kind)

    # -- reads ---------------------------------------------------------------------------

    def search(
        self,
        kind: str,
        vector: np.ndarray,
        limit: int,
        *,
        exclude_session: str | None = None,
        only_sessions: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        """The `limit` rows most similar to `vector`, best first (higher score = more similar).

        `exclude_session` leaves one session out; `only_sessions` keeps only those sessions
        (an empty list finds nothing). Filters apply before ranking, so up to `limit` hits
        come back whenever that many rows match.
        """
        check_kind(kind)
        if isinstance(only_sessions, str):
            raise TypeError("only_sessions must be a sequence of ids, not one string")
        if limit <= 0 or (only_sessions is not None and not only_sessions):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} numbers, this index {self.dim}")
        where = session_filter(exclude_session, only_sessions)
        hits: list[VectorHit] = []
        with tb.lance_errors(f"search {kind}"):
            # Recent first: rows move from there to main, so this order never misses one.
            if (recent := self._recent_rows(kind)) is not None:
                hits += recent.search(query, limit, exclude_session, only_sessions)
            if (main := self._table(kind)) is not None:
                version = self._versions.of(kind, main)
                if (held := self._held_copy(kind, main, version)) is not None:
                    hits += held.search(query, limit, exclude_session, only_sessions)
                elif (
                    found := self._graphs.search(
                        kind, version, query, limit, exclude_session, only_sessions
                    )
                ) is not None:
                    hits += found
                else:
                    hits += tb.search_table(main, query, limit, where, exact=bool(only_sessions))
        best: dict[str, VectorHit] = {}
        for hit in sorted(hits, key=lambda h: h.score, reverse=True):
            best.setdefault(hit.text_id, hit)  # a row caught mid-move shows up twice
        return list(best.values())[:limit]

    def inventory(self, kind: str) -> list[str]:
        """The text id of every stored row of `kind`, repeats included; reading every data
        file, it raises `StoreError` when the index is damaged."""
        check_kind(kind)
        ids: list[str] = []
        with tb.lance_errors(f"list {kind}"):
            for table in self._pair(kind):
                ids += tb.all_rows(table, ["text_id"])["text_id"].to_pylist()
        return ids

    def text_ids(self, kind: str) -> set[str]:
        """Every stored text id of `kind` (to repair drift between SQLite and LanceDB)."""
        return set(self.inventory(kind))

    def count(self, kind: str) -> int:
        """How many vectors of `kind` are stored."""
        check_kind(kind)
        with tb.lance_errors(f"count {kind}"):
            return sum(int(table.count_rows()) for table in self._pair(kind))
