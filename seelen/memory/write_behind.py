"""`WriteBehind`: a batch's vectors written in a thread of their own while the next batch embeds.

An indexing pass (an import, a re-index) reads a batch of texts, embeds it on both cores,
then writes the vectors (LanceDB's add, SQLite's marks, the graphs' upkeep) on one thread.
Done one after the other, both cores wait for every write: importing 21,015 texts spent
about 7 s of its 145 s of CPU outside the model, most of it in these writes, while the
embedding threads stood idle. Here the write of batch n runs while batch n+1 is read and
embedded: one write at a time, in order, and the caller waits for the last before it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType


class WriteBehind:
    """Runs each submitted write in one background thread, one at a time, in order.

    `in_flight` names the texts of the write under way, not yet marked as indexed: the next
    read skips them. A write's error is raised by the next `submit` or by leaving the block;
    leaving always waits for the write under way first, so nothing is written afterwards.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None
        self.in_flight: frozenset[str] = frozenset()

    def submit(self, write: Callable[[], None], text_ids: Iterable[str]) -> None:
        """Wait for the write before (raising its error), then start `write` of `text_ids`."""
        self.wait()
        if self._pool is None:  # created on first use: a small pass writes once
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="seelen-index-write")
        self.in_flight = frozenset(text_ids)
        self._last = self._pool.submit(write)

    def wait(self) -> None:
        """Wait for the write under way, if any; raises its error."""
        last, self._last = self._last, None
        try:
            if last is not None:
                last.result()
        finally:
            self.in_flight = frozenset()

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
