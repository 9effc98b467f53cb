"""Moving a `VectorIndex`'s whole folder: a damaged one aside, a rebuilt one in (mixed in)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from seelen.vectors import folders
from seelen.vectors import tables as tb

if TYPE_CHECKING:
    from seelen.vectors.versions import WriteGate


class IndexSwaps:
    """What `VectorIndex` does with its folder as a whole; mixed into it."""

    path: Path
    model_id: str
    dim: int
    index_min_rows: int
    recent_rows: int
    graph_rows: int | None
    optimize_every: int
    max_segments: int
    _open_lock: threading.Lock

    def __init__(
        self,
        path: Path,
        model_id: str,
        dim: int,
        *,
        index_min_rows: int,
        recent_rows: int,
        graph_rows: int | None,
        optimize_every: int,
        max_segments: int,
    ) -> None:
        raise NotImplementedError  # `VectorIndex.__init__`, which takes these and more

    def _writing(self) -> WriteGate:
        raise NotImplementedError

    def _forget_handles(self) -> None:
        raise NotImplementedError

    def _read_meta(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def move_aside(self) -> Path | None:
        """Rename a damaged index folder (never delete it) and start again empty; returns
        where it went. Only the newest `KEEP_DAMAGED` such folders are kept."""
        with self._writing(), self._open_lock:
            self._forget_handles()
            with tb.lance_errors("move the damaged index aside"):
                return folders.move_aside(self.path, "damaged")

    def staging(self) -> Self:
        """An empty index beside this one, to fill and then `swap_in` (a left-over one from
        an interrupted rebuild is removed first)."""
        path = folders.staging_path(self.path)
        with self._writing(), tb.lance_errors("prepare a new index"):
            folders.remove(path)
        staged = type(self)(
            path,
            self.model_id,
            self.dim,
            index_min_rows=self.index_min_rows,
            recent_rows=self.recent_rows,
            graph_rows=self.graph_rows,
            optimize_every=self.optimize_every,
            max_segments=self.max_segments,
        )
        staged.reset()
        return staged

    def swap_in(self, staged: Self) -> None:
        """Replace this index by the complete `staged` one. The old folder is deleted when
        it held a model's vectors, and kept (moved aside) when it was unreadable."""
        with self._writing(), self._open_lock, tb.lance_errors("swap in the new index"):
            readable = isinstance((self._read_meta() or {}).get("model_id"), str)
            self._forget_handles()
            folders.swap(self.path, staged.path, keep_old=not readable)

    def recover(self) -> None:
        """Finish a swap cut short by a crash, or remove a rebuild that never completed."""
        with self._writing(), self._open_lock, tb.lance_errors("recover the index"):
            if folders.recover(self.path):
                self._forget_handles()

    def aside(self) -> list[Path]:
        """Damaged index folders moved aside and kept, newest first."""
        return folders.damaged(self.path)
