"""An indexing pass writes batch n while batch n+1 embeds (memory/write_behind.py).

Real SQLite and LanceDB in a temporary folder; the embedder is the word hash of helpers,
wrapped to act (forget, wait, fail) while a batch is being embedded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers import HashEmbedder
from test_index_repair import assert_one_vector_per_text, fill

from seelen.memory.indexer import Indexer
from seelen.memory.write_behind import WriteBehind
from seelen.store import Store
from seelen.vectors import VectorIndex


class Hooked(HashEmbedder):
    """The word hash, calling `during(n, texts)` inside its n-th `embed` (from 1)."""

    def __init__(self, during: Callable[[int, Sequence[str]], None]) -> None:
        super().__init__()
        self.during, self.calls = during, 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.during(self.calls, texts)
        return super().embed(texts)


def opened(tmp_path: Path, embedder: HashEmbedder) -> tuple[Store, VectorIndex, Indexer]:
    store = Store(tmp_path / "chat_sessions.db")
    index = VectorIndex(tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim)
    return store, index, Indexer(store, index, embedder, batch=20)


def test_a_text_forgotten_while_its_batch_embeds_gets_no_vector(tmp_path: Path) -> None:
    """The batch was read before the forget: its write must leave the forgotten text out,
    or a vector would outlive its text. Every other text ends with one vector."""
    forgotten: list[str] = []

    def forget_one(call: int, texts: Sequence[str]) -> None:
        if call == 3:  # the second batch of turns (call 2 embedded the summaries)
            last = texts[-1].split("\n")[-1]  # a short turn is embedded after its context
            turns, _ = store.unindexed(200)
            session = next(t.session_id for t in turns if t.text == last)
            forgotten.extend(store.delete_session(session))
            indexer.forget(forgotten)

    store, index, indexer = opened(tmp_path, Hooked(forget_one))
    fill(store, sessions=6, turns=10)
    indexer.index_all()
    assert forgotten
    assert_one_vector_per_text(store, index)
    stored = set(index.inventory("turns")) | set(index.inventory("summaries"))
    assert not stored & set(forgotten)


def test_the_next_batch_embeds_while_the_last_one_is_written(tmp_path: Path) -> None:
    """A write held back does not hold back the next batch's embedding, and nothing is
    left unwritten when the pass returns."""
    release = threading.Event()
    embedded_while_held = threading.Event()
    store, index, indexer = opened(tmp_path, HashEmbedder())
    add = index.add

    def slow_add(*args: object, **kwargs: object) -> None:
        release.wait(10)
        add(*args, **kwargs)  # type: ignore[arg-type]

    def note(call: int, texts: Sequence[str]) -> None:
        if call > 2 and not release.is_set():  # a later batch, the first write still held
            embedded_while_held.set()
            release.set()

    indexer.embedder = Hooked(note)
    index.add = slow_add  # type: ignore[method-assign]
    fill(store, sessions=6, turns=10)
    assert indexer.index_all() == 66
    assert embedded_while_held.is_set()
    assert_one_vector_per_text(store, index)


def test_a_failed_write_is_raised_and_stops_the_writes() -> None:
    written: list[int] = []

    def fail() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"), WriteBehind() as behind:
        behind.submit(fail, ["a"])
        assert behind.in_flight == {"a"}
        behind.submit(lambda: written.append(1), ["b"])  # raises the first write's error
    assert written == []
    assert behind.in_flight == frozenset()
