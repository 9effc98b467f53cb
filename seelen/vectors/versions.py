"""The main tables' versions, read once while nothing is written.

Each search asks its main table's version (to know whether the copy in memory or the HNSW
graph still matches it), and `LanceTable.version` is a hand-off to LanceDB's event-loop
thread: 0.13-0.41 ms each in isolation, about seven a recall, and on busy cores each waits
for that thread to be scheduled. The connection checks no other process's writes (LanceDB's
`read_consistency_interval` is None: a table reads as it was opened, plus this object's own
writes), so a table's version moves only with the writes made through the same
`VectorIndex`, all of them under its write lock (`WriteGate`). Between two writes the
version read once is the version.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from lancedb.table import LanceTable


class WriteGate:
    """The index's write lock (reentrant) that counts writes: `generation` goes up when the
    outermost write begins and again when it ends, so it is odd while one is under way and
    unchanged only while nothing was written."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self.generation = 0

    def __enter__(self) -> WriteGate:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self.generation += 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.generation += 1
        self._lock.release()


class TableVersions:
    """Each main table's version, read from LanceDB only after a write (or on a table handle
    not seen before): the same number `LanceTable.version` gives, without the hand-off."""

    def __init__(self, gate: WriteGate) -> None:
        self._gate = gate
        # Per kind: the table handle (held, so its identity is never reused), the gate's
        # generation when its version was read, and that version.
        self._seen: dict[str, tuple[LanceTable, int, int]] = {}

    def of(self, kind: str, table: LanceTable) -> int:
        """`table.version`, read again only if a write began since it was last read."""
        generation = self._gate.generation
        seen = self._seen.get(kind)
        if seen is not None and seen[0] is table and seen[1] == generation:
            return seen[2]
        version = int(table.version)
        # Kept only if no write was under way or began meanwhile (a seqlock's check).
        if generation % 2 == 0 and self._gate.generation == generation:
            self._seen[kind] = (table, generation, version)
        return version

    def forget(self) -> None:
        """Drop every version read (the table handles were dropped)."""
        self._seen = {}
