"""LanceDB tables of vectors keyed by `text_id`: one for turns, one for summaries.

SQLite holds every text; a row here holds only ids, the session id, a timestamp and the
vector, and the caller joins results back by `text_id`. The embedding model's id and size
are recorded in a small JSON file beside the tables, so a model change is noticed.

Speed (see bench/bench_vectors.py): a flat LanceDB search costs about 1.6 ms per 1,000 rows
here, too slow at 100,000 turns, so a table of `index_min_rows` rows or more gets an IVF_SQ
index (int8 codes, 38 MB at 100k rows) whose candidates are re-ranked on the exact vectors
(`refine_factor`), so the scores are exact cosine similarities. Every `optimize_every` writes
the small fragments that one-turn appends leave behind are compacted and the new rows
folded into the indices; until then they are searched flat, which costs little.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seelen.atomic import atomic_write
from seelen.errors import StoreError

if TYPE_CHECKING:
    import pyarrow as pa

KINDS = ("turns", "summaries")
META_FILE = "seelen_vectors.json"
INDEX_MIN_ROWS = 5_000  # below this a flat search stays under ~8 ms
OPTIMIZE_EVERY = 20  # writes between compactions: ~20 extra fragments cost ~1 ms a search
NPROBES = 20  # IVF partitions of ~8k rows: all of them up to ~160k rows, i.e. exhaustive
REFINE_FACTOR = 5  # re-rank 5x `limit` candidates on the exact vectors
MAX_SEGMENTS = 6  # delta segments of the vector index before it is rebuilt
KEEP_VERSIONS = timedelta(hours=1)  # old table versions kept for readers still using them
ID_CHUNK = 500  # text ids per delete predicate, to keep each SQL statement small


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


@dataclass(frozen=True)
class VectorRow:
    """One text's vector, to be stored under its SQLite `text_id`."""

    text_id: str
    session_id: str
    ts_ms: int
    vector: np.ndarray


@dataclass(frozen=True)
class VectorHit:
    """A search result: `score` is the cosine similarity, higher = more similar."""

    text_id: str
    session_id: str
    score: float


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

    Opens lazily; safe to use from several threads (writes are serialised, searches are not
    blocked by them). `search` promises: hits come best first and a higher score means more
    similar, for every table, with or without an ANN index.
    """

    def __init__(
        self,
        path: Path,
        model_id: str,
        dim: int,
        *,
        index_min_rows: int = INDEX_MIN_ROWS,
        optimize_every: int = OPTIMIZE_EVERY,
    ) -> None:
        self.path = Path(path)
        self.model_id = model_id
        self.dim = dim
        self.index_min_rows = index_min_rows
        self.optimize_every = optimize_every
        self._open_lock = threading.Lock()  # short: opening tables, the meta cache
        self._write_lock = threading.RLock()  # long: writes and maintenance
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._writes: dict[str, int] = dict.fromkeys(KINDS, 0)
        self._meta: dict[str, Any] | None = None
        self._meta_loaded = False

    # -- model bookkeeping ------------------------------------------------------------

    def compatible(self) -> bool:
        """False when the stored vectors come from another model id or size (re-index)."""
        with self._open_lock:
            return self._compatible_locked()

    def _compatible_locked(self) -> bool:
        meta = self._read_meta()
        if meta is None:  # no record: fine only when nothing is stored yet
            return not any(self._table_exists(kind) for kind in KINDS)
        return meta.get("model_id") == self.model_id and meta.get("dim") == self.dim

    def reset(self) -> None:
        """Drop every vector and record this index's model id (before a re-index)."""
        with self._write_lock, self._open_lock, _lance_errors("reset"):
            db = self._connect()
            for kind in KINDS:
                db.drop_table(kind, ignore_missing=True)
            self._tables.clear()
            self._writes = dict.fromkeys(KINDS, 0)
            self._write_meta({"model_id": self.model_id, "dim": self.dim, "trained_rows": {}})

    def _read_meta(self) -> dict[str, Any] | None:
        if not self._meta_loaded:
            try:
                meta = json.loads((self.path / META_FILE).read_text(encoding="utf-8"))
                self._meta = meta if isinstance(meta, dict) else {}
            except FileNotFoundError:
                self._meta = None
            except (OSError, ValueError):
                self._meta = {}  # unreadable: treated as another model, so re-indexed
            self._meta_loaded = True
        return self._meta

    def _write_meta(self, meta: dict[str, Any]) -> None:
        atomic_write(self.path / META_FILE, json.dumps(meta, indent=2) + "\n")
        self._meta, self._meta_loaded = meta, True

    def _require_compatible(self) -> None:
        if not self._compatible_locked():
            raise StoreError(
                f"vector index {self.path} holds vectors of another embedding model; "
                "re-index your memory (seelen memory reindex)"
            )

    # -- tables -------------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._db is None:
            try:
                import lancedb
            except ImportError:
                raise StoreError("the 'lancedb' package is missing: reinstall Seelen") from None
            self.path.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(self.path)
        return self._db

    def _table_exists(self, kind: str) -> bool:
        return kind in self._tables or kind in self._connect().list_tables().tables

    def _table(self, kind: str, *, create: bool = False) -> Any:
        """The open table of `kind`; None if it does not exist and `create` is False."""
        with self._open_lock:
            if kind in self._tables:
                return self._tables[kind]
            self._require_compatible()
            db = self._connect()
            if kind in db.list_tables().tables:
                table = db.open_table(kind)
                # Small fragments left by a previous run count as pending writes.
                stats = table.stats()["fragment_stats"]
                self._writes[kind] = int(stats["num_small_fragments"])
            elif create:
                table = db.create_table(kind, schema=self._schema())
                if self._read_meta() is None:
                    self._write_meta({"model_id": self.model_id, "dim": self.dim})
            else:
                return None
            self._tables[kind] = table
            return table

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
        """Insert or replace rows by `text_id`; adding a text id again keeps one row."""
        _check_kind(kind)
        if not rows:
            return
        data = self._to_arrow(rows)
        with self._write_lock, _lance_errors(f"add {kind}"):
            table = self._table(kind, create=True)
            (
                table.merge_insert("text_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data)
            )
            self._wrote(kind, table)

    def delete(
        self, kind: str, *, text_ids: Sequence[str] = (), session_id: str | None = None
    ) -> int:
        """Delete rows with any of `text_ids` and every row of `session_id`; returns how many.

        Given neither, nothing is deleted.
        """
        _check_kind(kind)
        if isinstance(text_ids, str):
            raise TypeError("text_ids must be a sequence of ids, not one string")
        ids = list(dict.fromkeys(text_ids))
        predicates = [
            sql_in("text_id", ids[i : i + ID_CHUNK]) for i in range(0, len(ids), ID_CHUNK)
        ]
        if session_id is not None:
            predicates.append(f"session_id = {sql_string(session_id)}")
        if not predicates:
            return 0
        with self._write_lock, _lance_errors(f"delete {kind}"):
            table = self._table(kind)
            if table is None:
                return 0
            deleted = sum(int(table.delete(p).num_deleted_rows) for p in predicates)
            self._wrote(kind, table)
        return deleted

    def _wrote(self, kind: str, table: Any) -> None:
        self._writes[kind] += 1
        if self._writes[kind] >= self.optimize_every:
            self._maintain_table(kind, table)

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self) -> None:
        """Compact both tables and bring their indices up to date now (e.g. after a re-index)."""
        with self._write_lock, _lance_errors("optimize"):
            for kind in KINDS:
                table = self._table(kind)
                if table is not None:
                    self._maintain_table(kind, table)

    def _maintain_table(self, kind: str, table: Any) -> None:
        """Merge small fragments and index new rows; (re)build the vector index when due."""
        from lancedb.index import BTree

        table.optimize(cleanup_older_than=KEEP_VERSIONS)
        self._writes[kind] = 0
        rows = table.count_rows()
        if rows == 0:
            return
        indices = {i.columns[0]: i for i in table.list_indices()}
        # Scalar indices make upserts, deletes and the session filters cheap.
        for column in ("text_id", "session_id"):
            if column not in indices:
                table.create_index(column, config=BTree())
        if rows >= self.index_min_rows and self._vector_index_due(
            kind, rows, indices.get("vector")
        ):
            self._build_vector_index(kind, table, rows)

    def _vector_index_due(self, kind: str, rows: int, index: Any) -> bool:
        if index is None:
            return True
        # `optimize` adds each batch of new rows as a delta segment, searched one by one,
        # and a fragment that compaction cannot merge: rebuilding clears both.
        if index.num_segments > MAX_SEGMENTS:
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
        self._warm_table(table)

    def _trained_rows(self) -> dict[str, int]:
        meta = self._meta or {}
        trained = meta.get("trained_rows")
        return dict(trained) if isinstance(trained, dict) else {}

    def warm(self) -> None:
        """Load the indices into memory, so the first search is as fast as the next ones."""
        with _lance_errors("load indices"):
            for kind in KINDS:
                table = self._table(kind)
                if table is not None:
                    self._warm_table(table)

    @staticmethod
    def _warm_table(table: Any) -> None:
        for index in table.list_indices():
            table.prewarm_index(index.name)

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
        query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query_vector.shape[0] != self.dim:
            raise ValueError(f"query has {query_vector.shape[0]} numbers, this index {self.dim}")
        where = session_filter(exclude_session, only_sessions)
        with _lance_errors(f"search {kind}"):
            table = self._table(kind)
            if table is None:
                return []
            query = (
                table.search(query_vector, vector_column_name="vector")
                .distance_type("cosine")
                .select(["text_id", "session_id", "_distance"])
                .limit(limit)
            )
            if only_sessions:
                # A few sessions' rows: an exact scan of them beats probing the ANN index.
                query = query.bypass_vector_index()
            else:
                query = query.nprobes(NPROBES).refine_factor(REFINE_FACTOR)
            if where:
                query = query.where(where, prefilter=True)
            result = query.to_arrow()
        return [
            VectorHit(text_id, session_id, 1.0 - float(distance))
            for text_id, session_id, distance in zip(
                result["text_id"].to_pylist(),
                result["session_id"].to_pylist(),
                result["_distance"].to_pylist(),
                strict=True,
            )
        ]

    def text_ids(self, kind: str) -> set[str]:
        """Every stored text id of `kind` (to repair drift between SQLite and LanceDB)."""
        _check_kind(kind)
        with _lance_errors(f"list {kind}"):
            table = self._table(kind)
            if table is None:
                return set()
            result = table.search().select(["text_id"]).limit(None).to_arrow()
        return set(result["text_id"].to_pylist())

    def count(self, kind: str) -> int:
        """How many vectors of `kind` are stored."""
        _check_kind(kind)
        with _lance_errors(f"count {kind}"):
            table = self._table(kind)
            return 0 if table is None else int(table.count_rows())
