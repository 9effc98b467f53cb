"""The data that crosses the vector index's boundary: rows in, hits out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KINDS = ("turns", "summaries")


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


def check_kind(kind: str) -> None:
    """Raise ValueError unless `kind` is one of `KINDS`."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
