"""The files of an HNSW sidecar (`graph.py`): making a graph, its rows, writing both safely.

Each file is written through a temporary file in the same folder, made 0600, synced, then
renamed over the old one, so a reader finds the old version or the new one, never half.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from seelen.files import FILE_MODE

if TYPE_CHECKING:
    import pyarrow as pa
    from usearch.index import Index

ROWS_SUFFIX = ".graph.arrow"
# The lead's measurement on 100k real MiniLM vectors (384 d, 2 threads): build 16 s, query
# 0.25 / 0.34 ms median / p95, recall@10 0.998 against an exact scan (i8 codes: 0.89).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 64


@dataclass(frozen=True)
class Rows:
    """A sidecar's rows in position order, as its rows file holds them: `node_of` is the
    key of the graph node holding each row's vector, `digest` that vector's digest."""

    ids: pa.Array
    sessions: pa.Array
    alive: np.ndarray
    node_of: np.ndarray
    digest: np.ndarray


def rows_file(folder: Path, kind: str) -> Path:
    """The rows file of `kind`'s sidecar (its presence says a sidecar exists)."""
    return folder / f"{kind}{ROWS_SUFFIX}"


def new_graph(dim: int) -> Index:
    """An empty graph with this module's settings."""
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="cos",
        dtype="f16",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )


def vectors_of(data: pa.Table | pa.RecordBatch, dim: int) -> np.ndarray:
    """The `vector` column of `data` as float32 unit rows."""
    column = data["vector"]
    if hasattr(column, "combine_chunks"):  # a table's column: chunks of fixed-size lists
        column = column.combine_chunks()
    matrix: np.ndarray = column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    return unit_rows(matrix)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """`vectors` as float32 rows of length 1 (a zero row stays zero)."""
    matrix: np.ndarray = np.asarray(vectors, dtype=np.float32)
    scaled: np.ndarray = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return scaled


def digests(vectors: np.ndarray) -> np.ndarray:
    """8 bytes of BLAKE2b of each row's f16 value, as int64: equal for rows equal in f16
    (two different rows match by chance once in 2^64 pairs); ~1 s a million rows."""
    halves = np.ascontiguousarray(vectors, dtype=np.float16)
    out = np.empty(len(halves), dtype=np.int64)
    for i, row in enumerate(halves):
        digest = hashlib.blake2b(row.tobytes(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little", signed=True)
    return out


def write_rows(folder: Path, kind: str, rows: Rows, meta: dict[str, Any]) -> None:
    """Replace `kind`'s rows file (an Arrow IPC file; `meta` in its schema's metadata)."""
    import pyarrow as pa

    path = rows_file(folder, kind)
    fields = [("text_id", pa.string()), ("session_id", pa.string()), ("alive", pa.bool_())]
    fields += [("node", pa.int64()), ("digest", pa.int64())]
    schema = pa.schema(fields, metadata={k: str(v) for k, v in meta.items()})
    columns = [rows.ids, rows.sessions, pa.array(rows.alive, type=pa.bool_())]
    columns += [pa.array(rows.node_of, pa.int64()), pa.array(rows.digest, pa.int64())]
    table = pa.table(columns, schema=schema)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            writer.write_table(table)
        _settle(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_graph(folder: Path, kind: str, index: Index) -> tuple[str, int]:
    """Write `index` to a new graph file of `kind`; returns its name and size in bytes."""
    name = f"{kind}.graph-{secrets.token_hex(6)}.usearch"
    path = folder / name
    tmp = path.with_name(f".{name}.tmp")
    try:
        index.save(str(tmp))
        _settle(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return name, path.stat().st_size


def _settle(tmp: Path, path: Path) -> None:
    """Make `tmp` private and durable, then rename it to `path`."""
    os.chmod(tmp, FILE_MODE)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def remove_stale(folder: Path, kind: str, keep: str | None) -> None:
    """Delete `kind`'s graph files other than `keep` (a reader that mapped one keeps it
    until it closes: the file system frees it then), and left-over temporary files."""
    for path in folder.glob(f"{kind}.graph-*.usearch"):
        if path.name != keep:
            path.unlink(missing_ok=True)
    for path in folder.glob(f".{kind}.graph*.tmp"):
        path.unlink(missing_ok=True)
