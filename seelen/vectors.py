"""LanceDB tables of vectors keyed by `text_id`, for turns and for summaries.

SQLite holds every text; a row here holds only ids, the session id, a timestamp and the
vector, and the caller joins results back by `text_id`. The embedding model's id and size
are recorded in a small JSON file beside the tables, so a model change is noticed.

Each kind lives in two tables, like a small LSM tree (numbers: bench/bench_vectors.py,
2 cores):
- `<kind>_recent` takes every write and holds under `recent_rows` rows without an index.
  It is searched through an in-memory copy with numpy (~1 ms for 5,000 rows, where any
  LanceDB query costs ~3 ms however small its table), so its fragments cost no search time
  and it is compacted only every `optimize_every` writes.
- `<kind>` holds the rest, with an IVF_SQ index (int8 codes) whose candidates are re-ranked
  on the exact vectors, so scores are exact cosine similarities: ~10 ms at 100k rows where a
  flat search takes ~90-190 ms. A full recent table moves here in one write and the index
  is rebuilt (~1-5 s at 100k rows, in the writing thread), because each move would
  otherwise add a delta segment and a fragment that slow every search (+8 ms for the first).
Summaries (one per session) thus stay in memory up to ~5,000 sessions.
Why not one table: each small append is a fragment searched flat (~1 ms each at 100k rows),
and `optimize()` cannot merge new fragments into an indexed table without adding a delta
segment each time, so a single table needs either slow searches or a rebuild every few writes.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seelen.atomic import atomic_write
from seelen.errors import StoreError

if TYPE_CHECKING:
    import pyarrow as pa

KINDS = ("turns", "summaries")
RECENT = "_recent"  # suffix of the small write table of each kind
META_FILE = "seelen_vectors.json"
INDEX_MIN_ROWS = 5_000  # below this a flat search of the main table stays under ~8 ms
RECENT_ROWS = 5_000  # rows kept in memory as well (7.5 MB at 384 dims) before a move
OPTIMIZE_EVERY = 50  # writes between compactions of the recent table
MAX_SEGMENTS = 1  # index segments (1 + deltas) tolerated before a rebuild
NPROBES = 20  # IVF partitions hold ~8k rows: all are probed up to ~160k rows
REFINE_FACTOR = 3  # re-rank 3x `limit` candidates on the exact vectors (2x: recall 1.0)
KEEP_VERSIONS = timedelta(hours=1)  # old table versions kept for searches still using them
ID_CHUNK = 500  # text ids per SQL predicate, to keep each statement small
COLUMNS = ["text_id", "session_id", "ts_ms", "vector"]


def sql_string(value: str) -> str:
    """`value` as a SQL string literal for LanceDB (DataFusion) filters: `'` is doubled.

    Backslashes, `%`, `_` and `"` have no special meaning inside such a literal.
    """
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b')`; `column` must be a trusted name, never user input."""
    literals = [sql_string(v) for v in values]
    if not literals:
        raise ValueError("an IN list needs at least one value")
    return f"{column} IN ({', '.join(literals)})"


def session_filter(exclude_session: str | None, only_sessions: Sequence[str] | None) -> str | None:
    """The WHERE clause for `search`'s session options, or None for no filter."""
    parts = []
    if exclude_session is not None:
        parts.append(f"session_id != {sql_string(exclude_session)}")
    if only_sessions is not None:
        parts.append(sql_in("session_id", only_sessions))
    return " AND ".join(parts) or None


def _id_predicates(text_ids: Sequence[str]) -> list[str]:
    return [
        sql_in("text_id", text_ids[i : i + ID_CHUNK]) for i in range(0, len(text_ids), ID_CHUNK)
    ]


@dataclass(frozen=True)
class VectorRow:
    """One text's vector, to be stored under its SQLite `text_id`."""

    text_id: str
    session_id: str
    ts_ms: int
    vector: np.ndarray


@dataclass(frozen=True)
class VectorHit:
    """A search result: `score` is the cosine similarity, higher = more similar.

    `vector` is the stored (unit) vector, so callers can compare hits with each other.
    """

    text_id: str
    session_id: str
    score: float
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@contextmanager
def _lance_errors(action: str) -> Iterator[None]:
    """Report LanceDB and file-system failures as one `StoreError` line."""
    try:
        yield
    except (OSError, RuntimeError, ValueError) as exc:  # what lancedb and pyarrow raise
        raise StoreError(f"vector index: cannot {action}: {exc}") from exc


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


class VectorIndex:
    """The vectors of turns and summaries, searched by cosine similarity.

    Opens lazily and is safe to share between threads: writes are serialised, searches do
    not wait for them. `search` promises, for both kinds and whatever the table size: hits
    come best first, and a higher score means more similar. While the stored vectors belong
    to another model (`compatible()` is False) every method but `reset` raises `StoreError`.
    """

    def __init__(
        self,
        path: Path,
        model_id: str,
        dim: int,
        *,
        index_min_rows: int = INDEX_MIN_ROWS,
        recent_rows: int = RECENT_ROWS,
        optimize_every: int = OPTIMIZE_EVERY,
        max_segments: int = MAX_SEGMENTS,
    ) -> None:
        self.path = Path(path)
        self.model_id = model_id
        self.dim = dim
        self.index_min_rows = index_min_rows
        self.recent_rows = recent_rows
        self.optimize_every = optimize_every
        self.max_segments = max_segments
        self._open_lock = threading.Lock()  # short: opening tables, the meta cache
        self._write_lock = threading.RLock()  # long: writes and maintenance
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._absent: set[str] = set()  # names of tables known not to exist
        self._recent: dict[str, _RecentRows] = {}  # in-memory copies of the recent tables
        self._writes: dict[str, int] = {}
        self._meta: dict[str, Any] | None = None
        self._meta_loaded = False

    # -- the embedding model's record -----------------------------------------------------

    def compatible(self) -> bool:
        """False when the stored vectors come from another model id or size (re-index)."""
        with self._open_lock, _lance_errors("open"):
            return self._compatible_locked()

    def _compatible_locked(self) -> bool:
        meta = self._read_meta()
        if meta is None:  # no record: fine only when nothing is stored yet
            return not any(self._exists(k + s) for k in KINDS for s in ("", RECENT))
        return meta.get("model_id") == self.model_id and meta.get("dim") == self.dim

    def reset(self) -> None:
        """Drop every vector and record this index's model id (before a re-index)."""
        with self._write_lock, self._open_lock, _lance_errors("reset"):
            db = self._connect()
            for kind in KINDS:
                db.drop_table(kind, ignore_missing=True)
                db.drop_table(kind + RECENT, ignore_missing=True)
            self._tables.clear()
            self._absent.clear()
            self._recent.clear()
            self._writes.clear()
            self._write_meta({"model_id": self.model_id, "dim": self.dim, "trained_rows": {}})

    def _read_meta(self) -> dict[str, Any] | None:
        if not self._meta_loaded:
            try:
                meta = json.loads((self.path / META_FILE).read_text(encoding="utf-8"))
                self._meta = meta if isinstance(meta, dict) else {}
            except FileNotFoundError:
                self._meta = None
            except (OSError, ValueError):
                self._meta = {}  # unreadable: taken for another model, so re-indexed
            self._meta_loaded = True
        return self._meta

    def _write_meta(self, meta: dict[str, Any]) -> None:
        atomic_write(self.path / META_FILE, json.dumps(meta, indent=2) + "\n")
        self._meta, self._meta_loaded = meta, True

    def _trained_rows(self) -> dict[str, int]:
        trained = (self._meta or {}).get("trained_rows")
        return dict(trained) if isinstance(trained, dict) else {}

    # -- tables -------------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._db is None:
            # LanceDB's Rust log writes warnings (e.g. k-means on few rows) straight to the
            # terminal, over the prompt; only errors are worth a user's attention.
            os.environ.setdefault("LANCEDB_LOG", "error")
            try:
                import lancedb
            except ImportError:
                raise StoreError("the 'lancedb' package is missing: reinstall Seelen") from None
            self.path.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(self.path)
        return self._db

    def _exists(self, name: str) -> bool:
        return name in self._tables or name in self._connect().list_tables().tables

    def _table(self, name: str, *, create: bool = False) -> Any:
        """The open table `name`; None if it does not exist and `create` is False."""
        with self._open_lock:
            if name in self._tables:
                return self._tables[name]
            if name in self._absent and not create:
                return None
            if not self._compatible_locked():
                raise StoreError(
                    f"vector index {self.path} holds vectors of another embedding model; "
                    "re-index your memory (seelen memory reindex)"
                )
            db = self._connect()
            if name in db.list_tables().tables:
                table = db.open_table(name)
            elif create:
                table = db.create_table(name, schema=self._schema())
                if self._read_meta() is None:
                    self._write_meta({"model_id": self.model_id, "dim": self.dim})
            else:
                # Only this object creates tables (one process owns a data dir), so
                # remembering the absence spares each search a directory listing.
                self._absent.add(name)
                return None
            self._absent.discard(name)
            # Fragments left by earlier writes count as writes not yet compacted.
            self._writes[name] = int(table.stats()["fragment_stats"]["num_fragments"])
            if name.endswith(RECENT):  # loaded before any write through this object
                self._recent[name] = _RecentRows(self.dim, _all_rows(table))
            self._tables[name] = table
            return table

    def _pair(self, kind: str) -> list[Any]:
        """The existing tables of `kind`, the recent one first (see `search`)."""
        return [t for t in (self._table(kind + RECENT), self._table(kind)) if t is not None]

    def _recent_rows(self, kind: str) -> _RecentRows | None:
        """The in-memory copy of `kind`'s recent table, if that table exists."""
        return None if self._table(kind + RECENT) is None else self._recent[kind + RECENT]

    def _schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("text_id", pa.string(), nullable=False),
                pa.field("session_id", pa.string(), nullable=False),
                pa.field("ts_ms", pa.int64(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), self.dim), nullable=False),
            ]
        )

    def _to_arrow(self, rows: Sequence[VectorRow]) -> pa.Table:
        import pyarrow as pa

        # The same text id twice in one batch: the last one wins, as a later add would.
        latest = list({row.text_id: row for row in rows}.values())
        matrix = np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in latest])
        if matrix.shape[1] != self.dim:
            raise ValueError(f"vectors have {matrix.shape[1]} numbers, this index {self.dim}")
        if not np.isfinite(matrix).all():
            raise ValueError("vectors contain NaN or infinity")
        columns = {
            "text_id": [r.text_id for r in latest],
            "session_id": [r.session_id for r in latest],
            "ts_ms": [int(r.ts_ms) for r in latest],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), self.dim),
        }
        return pa.table(columns, schema=self._schema())

    # -- writes ------------------------------------------------------------------------

    def add(self, kind: str, rows: Sequence[VectorRow]) -> None:
        """Insert or replace rows by `text_id`; adding a text id again keeps one row.

        Usually a few milliseconds; a call that moves the recent table into the main one
        can take seconds (its rows are searchable before that starts): call it off the UI.
        """
        _check_kind(kind)
        if not rows:
            return
        data = self._to_arrow(rows)
        with self._write_lock, _lance_errors(f"add {kind}"):
            recent = self._table(kind + RECENT, create=True)
            _upsert(recent, data)
            self._recent[kind + RECENT].upsert(data)
            main = self._table(kind)
            if main is not None:  # a new version of a text already moved to the main table
                _delete_where(main, _id_predicates(data["text_id"].to_pylist()))
            self._after_write(kind, recent)

    def delete(
        self, kind: str, *, text_ids: Sequence[str] = (), session_id: str | None = None
    ) -> int:
        """Delete rows with any of `text_ids` and every row of `session_id`; returns how many.

        Given neither, nothing is deleted.
        """
        _check_kind(kind)
        if isinstance(text_ids, str):
            raise TypeError("text_ids must be a sequence of ids, not one string")
        predicates = _id_predicates(list(dict.fromkeys(text_ids)))
        if session_id is not None:
            predicates.append(f"session_id = {sql_string(session_id)}")
        if not predicates:
            return 0
        with self._write_lock, _lance_errors(f"delete {kind}"):
            deleted = sum(_delete_where(table, predicates) for table in self._pair(kind))
            if (rows := self._recent_rows(kind)) is not None:
                rows.delete(set(text_ids), session_id)
            return deleted

    def _after_write(self, kind: str, recent: Any) -> None:
        name = kind + RECENT
        self._writes[name] += 1
        if len(self._recent[name]) >= self.recent_rows:
            self._move_recent(kind, recent)
        elif self._writes[name] >= self.optimize_every:
            # Without an index this merges all the one-write fragments into one.
            recent.optimize(cleanup_older_than=KEEP_VERSIONS)
            self._writes[name] = 0

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self) -> None:
        """Compact every table and bring the indices up to date now (e.g. after a bulk
        re-index); otherwise this happens by itself as rows are added."""
        with self._write_lock, _lance_errors("optimize"):
            for kind in KINDS:
                if (recent := self._table(kind + RECENT)) is not None:
                    recent.optimize(cleanup_older_than=KEEP_VERSIONS)
                    self._writes[kind + RECENT] = 0
                if (main := self._table(kind)) is not None:
                    self._maintain_main(kind, main)

    def _move_recent(self, kind: str, recent: Any) -> None:
        """Copy the recent table into the main one in a single write, then empty it."""
        data = _all_rows(recent)
        main = self._table(kind, create=True)
        # Into main first: a search reads `recent` before `main`, so it never misses a row.
        _upsert(main, data)
        _delete_where(recent, _id_predicates(data["text_id"].to_pylist()))
        self._recent[kind + RECENT].clear()
        recent.optimize(cleanup_older_than=KEEP_VERSIONS)
        self._writes[kind + RECENT] = 0
        self._maintain_main(kind, main)

    def _maintain_main(self, kind: str, table: Any) -> None:
        """Compact, index the moved rows; (re)build the vector index when due."""
        from lancedb.index import BTree

        table.optimize(cleanup_older_than=KEEP_VERSIONS)
        rows = table.count_rows()
        indices = {i.columns[0]: i for i in table.list_indices()}
        # Scalar indices make upserts, deletes and the session filters cheap.
        for column in ("text_id", "session_id"):
            if column not in indices and rows:
                table.create_index(column, config=BTree())
        if rows >= self.index_min_rows and self._vector_index_due(
            kind, rows, indices.get("vector")
        ):
            self._build_vector_index(kind, table, rows)

    def _vector_index_due(self, kind: str, rows: int, index: Any) -> bool:
        if index is None:
            return True
        # Each move adds a delta segment, searched one by one; a rebuild merges them.
        if index.num_segments > self.max_segments:
            return True
        # Retrain when the table has doubled, so the partitions keep fitting the data.
        return rows >= 2 * self._trained_rows().get(kind, rows)

    def _build_vector_index(self, kind: str, table: Any, rows: int) -> None:
        from lancedb.index import IvfSq

        table.create_index("vector", config=IvfSq(distance_type="cosine"), replace=True)
        # With every fragment under one index again, compaction can merge them all.
        table.optimize(cleanup_older_than=KEEP_VERSIONS)
        with self._open_lock:
            meta = dict(self._read_meta() or {})
            meta["trained_rows"] = {**self._trained_rows(), kind: rows}
            self._write_meta(meta)
        _warm(table)

    def warm(self) -> None:
        """Import LanceDB and load the indices now (e.g. in a background thread at start-up),
        so the first search is as fast as the next ones."""
        with _lance_errors("load indices"):
            for kind in KINDS:
                for table in self._pair(kind):
                    _warm(table)

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
        _check_kind(kind)
        if isinstance(only_sessions, str):
            raise TypeError("only_sessions must be a sequence of ids, not one string")
        if limit <= 0 or (only_sessions is not None and not only_sessions):
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} numbers, this index {self.dim}")
        where = session_filter(exclude_session, only_sessions)
        hits: list[VectorHit] = []
        with _lance_errors(f"search {kind}"):
            # Recent first: rows move from there to main, so this order never misses one.
            if (recent := self._recent_rows(kind)) is not None:
                hits += recent.search(query, limit, exclude_session, only_sessions)
            if (main := self._table(kind)) is not None:
                hits += _search_table(main, query, limit, where, exact=bool(only_sessions))
        best: dict[str, VectorHit] = {}
        for hit in sorted(hits, key=lambda h: h.score, reverse=True):
            best.setdefault(hit.text_id, hit)  # a row caught mid-move shows up twice
        return list(best.values())[:limit]

    def text_ids(self, kind: str) -> set[str]:
        """Every stored text id of `kind` (to repair drift between SQLite and LanceDB)."""
        _check_kind(kind)
        ids: set[str] = set()
        with _lance_errors(f"list {kind}"):
            for table in self._pair(kind):
                result = table.search().select(["text_id"]).limit(None).to_arrow()
                ids.update(result["text_id"].to_pylist())
        return ids

    def count(self, kind: str) -> int:
        """How many vectors of `kind` are stored."""
        _check_kind(kind)
        with _lance_errors(f"count {kind}"):
            return sum(int(table.count_rows()) for table in self._pair(kind))


def _all_rows(table: Any) -> pa.Table:
    return table.search().select(COLUMNS).limit(None).to_arrow()


def _upsert(table: Any, data: pa.Table) -> None:
    table.merge_insert("text_id").when_matched_update_all().when_not_matched_insert_all().execute(
        data
    )


def _delete_where(table: Any, predicates: Sequence[str]) -> int:
    """Delete rows matching any predicate; returns how many. Skips predicates that match
    nothing, because a delete commits a new table version even then."""
    deleted = 0
    for predicate in predicates:
        if table.count_rows(predicate):
            deleted += int(table.delete(predicate).num_deleted_rows)
    return deleted


def _search_table(
    table: Any, vector: np.ndarray, limit: int, where: str | None, *, exact: bool
) -> list[VectorHit]:
    """Nearest rows of one table by cosine distance, as hits with score = 1 - distance."""
    query = (
        table.search(vector, vector_column_name="vector")
        .distance_type("cosine")
        .select(["text_id", "session_id", "vector", "_distance"])
        .limit(limit)
    )
    if exact:
        # A few sessions' rows: scanning just those beats probing the ANN index.
        query = query.bypass_vector_index()
    else:
        query = query.nprobes(NPROBES).refine_factor(REFINE_FACTOR)
    if where:
        query = query.where(where, prefilter=True)
    result = query.to_arrow()
    dim = result.schema.field("vector").type.list_size
    flat = result["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
    vectors = np.asarray(flat, dtype=np.float32).reshape(-1, dim)
    return [
        VectorHit(text_id, session_id, 1.0 - float(distance), vector)
        for text_id, session_id, distance, vector in zip(
            result["text_id"].to_pylist(),
            result["session_id"].to_pylist(),
            result["_distance"].to_pylist(),
            vectors,
            strict=True,
        )
    ]


class _RecentRows:
    """An in-memory copy of one `<kind>_recent` table, searched exactly with numpy.

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
        """Insert or replace the rows of `data` (columns as in `COLUMNS`)."""
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
        """The best `limit` rows by cosine similarity, with `search`'s session filters."""
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


def _warm(table: Any) -> None:
    for index in table.list_indices():
        table.prewarm_index(index.name)
