"""Operations on one LanceDB table: schema, upsert, delete, search, errors.

Stateless helpers; `VectorIndex` decides which table each one runs on.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from seelen.deferred import LANCEDB, LANCEDB_REST_CLIENT, defer_init
from seelen.errors import StoreError
from seelen.files import private_dir
from seelen.heap import limit_arenas
from seelen.vectors.records import VectorHit, VectorRow

if TYPE_CHECKING:
    import pyarrow as pa
    from lancedb.db import LanceDBConnection
    from lancedb.table import LanceTable

NPROBES = 20  # IVF partitions hold ~8k rows: all are probed up to ~160k rows
REFINE_FACTOR = 3  # re-rank 3x `limit` candidates on the exact vectors (2x: recall 1.0)
INDEX_CACHE_BYTES = 64 * 2**20  # see `connect`
METADATA_CACHE_BYTES = 16 * 2**20  # table manifests and fragment statistics
KEEP_VERSIONS = timedelta(hours=1)  # old table versions kept for searches still using them
COLUMNS = ["text_id", "session_id", "ts_ms", "vector"]


@contextmanager
def lance_errors(action: str) -> Iterator[None]:
    """Report LanceDB and file-system failures as one `StoreError` line."""
    try:
        yield
    except (OSError, RuntimeError, ValueError) as exc:  # what lancedb and pyarrow raise
        raise StoreError(f"vector index: cannot {action}: {exc}") from exc


def connect(path: Path) -> LanceDBConnection:
    """A LanceDB connection to the folder `path`, created 0700 if missing."""
    # LanceDB's Rust log writes warnings (e.g. k-means on few rows) straight to the
    # terminal, over the prompt; only errors are worth a user's attention.
    os.environ.setdefault("LANCEDB_LOG", "error")
    limit_arenas()  # before LanceDB starts its threads
    defer_init(LANCEDB_REST_CLIENT)  # a local database never calls it
    try:
        if LANCEDB not in sys.modules:  # the version is read from disk (1 ms)
            defer_init(LANCEDB, {"__version__": importlib.metadata.version(LANCEDB)})
        from lancedb._lancedb import Session
        from lancedb.db import LanceDBConnection
    except ImportError:  # importlib.metadata's PackageNotFoundError is one
        raise StoreError("the 'lancedb' package is missing: reinstall Seelen") from None
    private_dir(path)
    # Bounded caches: a search keeps the index partitions it probed, and unbounded they grew
    # to the whole index (389 MB at a million turns). At 1M turns, 60 searches: 64 MiB of
    # index cache gave 31.7 / 45.2 ms median / p95 and 427 MiB RSS, no bound 24.4 / 50.3 ms
    # and 559 MiB (load 1.6); an index smaller than the bound is kept whole, as before.
    session = Session(
        index_cache_size_bytes=INDEX_CACHE_BYTES, metadata_cache_size_bytes=METADATA_CACHE_BYTES
    )
    # What `lancedb.connect` makes of a folder (it imports the cloud client to decide so).
    return LanceDBConnection(path, session=session)


def schema(dim: int) -> pa.Schema:
    """The columns of every table: ids, the session, a timestamp and a `dim`-number vector."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("text_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("ts_ms", pa.int64(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ]
    )


def to_arrow(rows: Sequence[VectorRow], dim: int) -> pa.Table:
    """`rows` as an Arrow table; checks sizes and refuses NaN or infinity."""
    import pyarrow as pa

    # The same text id twice in one batch: the last one wins, as a later add would.
    latest = list({row.text_id: row for row in rows}.values())
    matrix = np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in latest])
    if matrix.shape[1] != dim:
        raise ValueError(f"vectors have {matrix.shape[1]} numbers, this index {dim}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors contain NaN or infinity")
    columns = {
        "text_id": [r.text_id for r in latest],
        "session_id": [r.session_id for r in latest],
        "ts_ms": [int(r.ts_ms) for r in latest],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), dim),
    }
    return pa.table(columns, schema=schema(dim))


def all_rows(table: LanceTable, columns: Sequence[str] = COLUMNS) -> pa.Table:
    """Every row of `table` (reads each data file: a damaged one raises)."""
    return table.search().select(list(columns)).limit(None).to_arrow()


def upsert(table: LanceTable, data: pa.Table) -> None:
    """Insert `data`, replacing rows with the same `text_id`."""
    table.merge_insert("text_id").when_matched_update_all().when_not_matched_insert_all().execute(
        data
    )


def delete_where(table: LanceTable, predicates: Sequence[str]) -> int:
    """Delete rows matching any predicate; returns how many. Skips predicates that match
    nothing, because a delete commits a new table version even then."""
    deleted = 0
    for predicate in predicates:
        if table.count_rows(predicate):
            # The stub of DeleteResult lags the runtime's, which counts the rows.
            deleted += int(table.delete(predicate).num_deleted_rows)  # type: ignore[attr-defined]
    return deleted


def search_table(
    table: LanceTable, vector: np.ndarray, limit: int, where: str | None, *, exact: bool
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
