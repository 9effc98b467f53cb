"""Making a sidecar's graph (`graph.py`) and its rows, and bringing them through the writer's
changes: a whole build from a snapshot of the main table, rows flagged when deleted, rows
added by a move.

A whole build takes long (100k distinct vectors: 16-24 s of two cores; a million: ~13 min),
so it reads a snapshot of the table (one version, checked out on a handle of its own) with no
lock held, while the writer goes on adding and forgetting; the changes it makes meanwhile are
kept (`TableChange`) and replayed on the built graph before it is published (`sidecar.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from seelen.vectors import graph_files as gf

if TYPE_CHECKING:
    import pyarrow as pa
    from lancedb.table import LanceTable
    from usearch.index import Index

# Rows read from LanceDB and added at a time: 30 MB of float32 at 384 d. Building the graph of
# a million rows peaked at 2,236 MiB when read as one scan's batches (which read ahead and
# kept whole fragments), at 575 MiB by offsets (144 before it began; 1,129 distinct vectors).
BATCH_ROWS = 20_000


@dataclass(frozen=True)
class TableChange:
    """One write of a main table, from version `before` to `after`: rows deleted by id or
    session, rows added (a move; an added id replaces the row it had)."""

    before: int
    after: int
    added: pa.Table | None = None
    removed_ids: Collection[str] = ()
    removed_session: str | None = None


@dataclass
class Built:
    """A graph made from a table's rows, not yet published: `saved` names its file once
    written (and saved again if a replayed move changed it)."""

    index: Index
    rows: gf.Rows
    saved: str = ""


def build_whole(table: LanceTable, dim: int) -> Built:
    """A graph of every row of `table` (a snapshot: nothing writes it meanwhile), read in
    batches by offset."""
    import pyarrow as pa

    index = gf.new_graph(dim)
    nodes = _Nodes({}, 0)
    parts: list[gf.Rows] = []
    total = int(table.count_rows())
    for start in range(0, total, BATCH_ROWS):  # offsets read only their rows: a scan's
        offsets = list(range(start, min(total, start + BATCH_ROWS)))  # batches read ahead
        batch = table.take_offsets(offsets).select(["text_id", "session_id", "vector"])
        parts.append(nodes.add(index, batch.to_arrow(), dim))
    if not parts:
        empty = pa.array([], pa.string())
        parts.append(gf.Rows(empty, empty, *(np.array([], t) for t in (bool, np.int64, np.int64))))
    return Built(index, joined(parts))


def replayed(built: Built, changes: Sequence[TableChange], dim: int) -> Built:
    """`built` through `changes` in order: deleted rows flagged, added rows put in the graph
    (which then needs saving again: `saved` is cleared)."""
    for change in changes:
        added = change.added
        gone = set(change.removed_ids)
        gone |= set(added["text_id"].to_pylist()) if added is not None else set()
        rows = flagged(built.rows, gone, change.removed_session)
        if added is None:
            built = Built(built.index, rows, built.saved)
        else:
            built = Built(built.index, grown(built.index, rows, added, dim))
    return built


def flagged(rows: gf.Rows, gone: Collection[str], session: str | None) -> gf.Rows:
    """`rows` with those of ids `gone` and of `session` flagged as removed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    alive = rows.alive.copy()
    if gone:
        found = pc.is_in(rows.ids, value_set=pa.array(list(gone), pa.string()))
        alive &= ~found.to_numpy(zero_copy_only=False)
    if session is not None:
        alive &= ~pc.equal(rows.sessions, session).to_numpy(zero_copy_only=False)
    return gf.Rows(rows.ids, rows.sessions, alive, rows.node_of, rows.digest)


def grown(index: Index, rows: gf.Rows, added: pa.Table, dim: int) -> gf.Rows:
    """`rows` followed by `added`: the nodes only removed rows held leave `index`, and the
    added rows' new vectors join it."""
    alive = rows.alive
    live = np.zeros(len(alive), dtype=bool)
    live[rows.node_of[alive]] = True
    index.remove(np.flatnonzero(~live))  # nodes of removed rows only; absent keys: skipped
    first = dict(zip(rows.digest[alive].tolist(), rows.node_of[alive].tolist(), strict=True))
    more = _Nodes(first, len(alive)).add(index, added, dim)
    return joined([rows, more])


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


def joined(parts: list[gf.Rows]) -> gf.Rows:
    """The rows of `parts`, one after the other."""
    import pyarrow as pa

    return gf.Rows(
        pa.concat_arrays([p.ids for p in parts]),
        pa.concat_arrays([p.sessions for p in parts]),
        np.concatenate([p.alive for p in parts]),
        np.concatenate([p.node_of for p in parts]),
        np.concatenate([p.digest for p in parts]),
    )
