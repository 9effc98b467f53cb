"""`Drift`: how SQLite's texts and the vector index's rows differ, one kind of texts at a time
(what the indexer's repair and `db check` act on)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seelen.counts import counted
from seelen.store import Store

if TYPE_CHECKING:
    from seelen.vectors import VectorIndex

KINDS = ("turns", "summaries")


@dataclass(frozen=True)
class Drift:
    """How one kind of texts in SQLite and its vectors differ."""

    kind: str
    texts: int  # texts of this kind that belong in the index
    vectors: int  # rows the index holds
    pending: int  # texts waiting to be indexed (normal; the indexer catches up)
    missing: tuple[str, ...]  # marked as indexed, yet without a vector
    orphans: tuple[str, ...]  # vectors whose text is gone
    duplicates: tuple[str, ...]  # texts with more than one vector

    @property
    def ok(self) -> bool:
        """True when every vector has one text and every indexed text one vector."""
        return not (self.missing or self.orphans or self.duplicates)

    def describe(self) -> str:
        """One line: counts, and what is wrong if anything."""
        line = f"{self.kind}: {counted(self.vectors, 'vector')} for {counted(self.texts, 'text')}"
        missing, orphans, doubled = len(self.missing), len(self.orphans), len(self.duplicates)
        problems = [
            f"{counted(missing, 'indexed text')} without a vector" if missing else "",
            f"{self.pending:,} waiting to be indexed" if self.pending else "",
            f"{counted(orphans, 'vector')} without a text" if orphans else "",
            f"{counted(doubled, 'text')} with several vectors" if doubled else "",
        ]
        return "; ".join([line, *filter(None, problems)])


def measure(store: Store, index: VectorIndex, kind: str) -> Drift:
    """Compare SQLite's texts of `kind` with the index's rows; raises `StoreError` when the
    index cannot be read (every data file is read, so damage shows)."""
    flags = store.index_flags(kind)
    rows = index.inventory(kind)
    counts = Counter(rows)
    return Drift(
        kind,
        texts=len(flags),
        vectors=len(rows),
        pending=sum(1 for marked in flags.values() if not marked),
        missing=tuple(i for i, marked in flags.items() if marked and i not in counts),
        orphans=tuple(i for i in counts if i not in flags),
        duplicates=tuple(i for i, n in counts.items() if n > 1 and i in flags),
    )
