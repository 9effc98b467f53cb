"""The `Indexer`: keeps the vector index in step with SQLite, and rebuilds it from SQLite.

Texts are committed to SQLite first with `indexed = 0`, embedded in batches in a background
thread, added to LanceDB, then marked (each batch's write runs while the next one embeds).
SQLite is the truth; the index can always be rebuilt:
- Before its first batch the indexer `repair`s: it finishes or removes a rebuild a crash
  cut short, compares what SQLite marks as indexed with the rows the index holds (missing
  vectors are queued again, orphans and duplicates dropped), and moves a damaged index aside
  (renamed, never deleted) so that every text is indexed again into a fresh one.
- A re-index (`rebuild`, also after an embedding-model change) embeds everything into new
  tables beside the live ones and swaps them in only when complete; recall keeps using the
  old vectors, or keywords alone, meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from seelen.counts import counted
from seelen.errors import StoreError
from seelen.memory.context import clip, estimate_tokens
from seelen.memory.drift import KINDS as KINDS
from seelen.memory.drift import Drift as Drift
from seelen.memory.drift import measure as measure
from seelen.memory.write_behind import WriteBehind
from seelen.store import Store, Summary, Turn

if TYPE_CHECKING:
    import numpy as np

    from seelen.models.embed import Embedder
    from seelen.vectors import VectorIndex

# A turn under this many tokens (about 60 characters of English, 16 of Chinese) rarely names
# what it is about ("Yes, in Lisbon!", "That one, the red one"): it is embedded together with
# the turn before it, cut to ANSWERED_TOKENS so the reply still weighs in its own vector.
# Round numbers from the shape of chat, not fitted to a data set.
SHORT_TURN_TOKENS = 16
ANSWERED_TOKENS = 48
Progress = Callable[[int, int], None]
# Texts read and embedded at a time when many wait (an import, a re-index): the embedder
# sorts each call's texts by length, and over 256 chat texts its batches hold 1.12 times the
# word pieces the texts have (1.76 times over 64: the rest is padding, computed for nothing).
BATCH = 256


class Indexer:
    """Embeds new texts from SQLite into LanceDB, in a background thread or on demand."""

    def __init__(
        self, store: Store, index: VectorIndex, embedder: Embedder, *, batch: int = BATCH
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.batch = batch
        self._wake = threading.Event()
        self._idle = threading.Event()  # set when the background thread has caught up
        self._stop = threading.Event()
        self._run_lock = threading.Lock()  # one indexing pass at a time, whoever asks
        # A batch read before a text was deleted must not add its vector after `forget`
        # ran: a batch's write and forgetting take turns, and the write leaves out what was
        # forgotten since the pass began (the batch is read and embedded without the lock,
        # while the batch before it is written: `WriteBehind`).
        self._batch_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._repaired = False
        self._forgotten: set[str] = set()  # forgotten while a batch was between read and write
        self.error: str | None = None
        self.repairs: list[str] = []  # what the last `repair` did, one line each
        self._doing: tuple[str, int, int] | None = None  # (what, done, total) of a long pass

    def working(self) -> bool:
        """Whether the background thread is embedding now (no I/O: its own state)."""
        return self._thread is not None and not self._idle.is_set()

    def status(self) -> str:
        """A few words on a long pass under way ("re-indexing memory 120/2000"), else ''."""
        doing = self._doing
        return f"{doing[0]} {doing[1]}/{doing[2]}" if doing else ""

    def _report(self, what: str, progress: Progress | None, done: int, total: int) -> None:
        # Only passes longer than a batch are worth showing; small ones end at once.
        self._doing = (what, done, total) if total > self.batch and done < total else None
        if progress:
            progress(done, total)

    def needs_reindex(self) -> bool:
        """True when the stored vectors were made by another model (or cannot be read)."""
        return not self.index.compatible()

    def pending(self) -> int:
        """How many texts wait to be indexed."""
        return self.store.count_unindexed()

    def use(self, embedder: Embedder) -> None:
        """Embed with `embedder` from now on: the next pass re-indexes everything for it."""
        with self._run_lock:
            self.embedder = embedder
            self.index.model_id, self.index.dim = embedder.model_id, embedder.dim
            self._repaired = False  # the repair compares models and starts the rebuild

    def behind(self) -> bool:
        """True when texts wait to be indexed, or all of them to be embedded again by
        another model (EMBEDDING_PROVIDER=auto switched, or the setting changed)."""
        return self.pending() > 0 or self.needs_reindex()

    # -- keeping in step ----------------------------------------------------------------

    def index_all(self, progress: Progress | None = None) -> int:
        """Repair (once), then index everything pending now, in this thread; returns how
        many texts were embedded."""
        with self._run_lock:
            if not self._repaired:
                self.repairs = self._repair(progress)
                self._repaired = True
            try:
                return self._index_pending(progress)
            except StoreError as exc:
                if not self._damaged(exc):
                    raise
                return self._index_pending(progress)

    def repair(self, progress: Progress | None = None) -> list[str]:
        """Bring the index in step with SQLite now; returns what was done, one line each."""
        with self._run_lock:
            self.repairs = self._repair(progress)
            self._repaired = True
            return self.repairs

    def _repair(self, progress: Progress | None) -> list[str]:
        index = self.index
        index.recover()
        if not index.compatible():
            n = self._rebuild(progress)
            return [f"re-indexed {counted(n, 'text')} for the embedding model {index.model_id}"]
        try:
            drifts = [measure(self.store, index, kind) for kind in KINDS]
        except StoreError as exc:
            return [self._move_damaged(exc)]
        done = []
        for drift in drifts:
            if drift.orphans or drift.duplicates:
                index.delete(drift.kind, text_ids=[*drift.orphans, *drift.duplicates])
            if drift.missing or drift.duplicates:
                self.store.mark_indexed([*drift.missing, *drift.duplicates], False)
            if not drift.ok:
                done.append("repaired " + drift.describe())
        return done

    def _damaged(self, exc: StoreError) -> bool:
        """After a failed write: if the index cannot even be read, move it aside (True);
        otherwise the failure is something else (a full disk…) and is reported as it is."""
        try:
            for kind in KINDS:
                self.index.inventory(kind)
        except StoreError:
            self.repairs.append(self._move_damaged(exc))
            return True
        return False

    def _move_damaged(self, exc: StoreError) -> str:
        where = self.index.move_aside()
        self.store.mark_all_unindexed()
        return f"the vector index was damaged ({exc}); moved it to {where} and re-indexing"

    def _index_pending(self, progress: Progress | None) -> int:
        total = self.pending()
        if total <= self.batch:
            return self._index_batches(total, progress)
        with self.index.bulk():  # many texts: the index's upkeep once, at the end
            done = self._index_batches(total, progress)
            # The model's ~90 MiB go before the upkeep at the pass's end (the IVF build) peaks:
            # importing 21,015 texts peaked at 436 instead of 509 MiB, a re-index at 441 instead
            # of 522 (bench_scale.py, load 1.2-2.3); the next text loads it again (0.23 s).
            self.embedder.release()
        return done

    def _index_batches(self, total: int, progress: Progress | None) -> int:
        done = 0
        with self._batch_lock:
            self._forgotten.clear()  # only forgets during this pass matter to its writes
        with WriteBehind() as behind:  # batch n written while batch n+1 embeds
            while not self._stop.is_set():
                batch = self._unindexed(behind.in_flight)  # no lock: `_write` checks forgets
                if not batch:
                    break
                embedded = [(kind, items, self._vectors(kind, items)) for kind, items in batch]
                ids = [i.text_id for _, items in batch for i in items]
                behind.submit(partial(self._write, embedded), ids)
                done += len(ids)
                self._report("indexing memory", progress, done, max(total, done))
        with self._batch_lock:
            self._forgotten.clear()
        self._doing = None
        return done

    def _unindexed(self, skip: frozenset[str]) -> list[tuple[str, Sequence[Turn | Summary]]]:
        """The next batch of each kind waiting for a vector, without the texts in `skip`
        (the batch being written, not yet marked)."""
        turns, summaries = self.store.unindexed(self.batch + len(skip))
        batch = [
            (k, [i for i in items if i.text_id not in skip][: self.batch])
            for k, items in (("turns", turns), ("summaries", summaries))
        ]
        return [(kind, items) for kind, items in batch if items]

    def _write(self, embedded: list[tuple[str, Sequence[Turn | Summary], np.ndarray]]) -> None:
        """Add a batch's vectors and mark its texts, but none forgotten since it was read: a
        vector added after `forget` ran would outlive its text."""
        with self._batch_lock:
            for kind, items, vectors in embedded:
                kept = [
                    (i, v)
                    for i, v in zip(items, vectors, strict=True)
                    if i.text_id not in self._forgotten
                ]
                self._add(self.index, kind, kept)
                self.store.mark_indexed([i.text_id for i, _ in kept])
        self.index.build_graphs()  # a move's whole build: forgetting need not wait

    def _vectors(self, kind: str, items: Sequence[Turn | Summary]) -> np.ndarray:
        texts = self._with_context(items) if kind == "turns" else [i.text for i in items]
        return self.embedder.embed(texts)

    @staticmethod
    def _add(index: VectorIndex, kind: str, pairs: Sequence[tuple[Turn | Summary, Any]]) -> None:
        from seelen.vectors import VectorRow

        rows = [VectorRow(i.text_id, i.session_id, _start(i), v) for i, v in pairs]
        index.add(kind, rows, build=False)  # graphs built after the batch (`_write`)

    def _with_context(self, turns: Sequence[Any]) -> list[str]:
        """What to embed for each turn: the user's short reply together with the turn it
        answers, so "Yes, in Lisbon!" is found by "where did she move?". Only the user's: a
        short assistant "Noted!" after a fact would become a copy of the fact and take its
        place in the list (on bench_recall, turn MRR fell from 0.45 to 0.36). Only the vector
        sees this; SQLite keeps the turn's own text."""
        short = [
            t.text_id
            for t in turns
            if t.role == "user" and estimate_tokens(t.text) < SHORT_TURN_TOKENS
        ]
        before = self.store.spoken_before(short)
        return [
            f"{clip(before[t.text_id], ANSWERED_TOKENS)}\n{t.text}"
            if t.text_id in before
            else t.text
            for t in turns
        ]

    # -- rebuilding ---------------------------------------------------------------------

    def rebuild(self, progress: Progress | None = None) -> int:
        """Re-embed every text into new tables and swap them in when complete (`memory
        reindex`); returns how many texts. Until the swap, recall uses the old vectors."""
        with self._run_lock:
            n = self._rebuild(progress)
            self._repaired = True
            return n

    def _rebuild(self, progress: Progress | None) -> int:
        staged = self.index.staging()
        total = sum(len(self.store.index_flags(kind)) for kind in KINDS)
        embedded: list[str] = []
        with staged.bulk():  # its upkeep once, at the end
            done = self._rebuild_into(staged, progress, total, embedded)
            self.embedder.release()  # before the upkeep's peak, as in `_index_pending`
        self._doing = None
        if self._stop.is_set():
            return done  # the staged folder is removed by the next `recover`
        self.index.swap_in(staged)
        # A crash here leaves texts marked 0 that have a vector: they are embedded again.
        self.store.mark_indexed(embedded)
        self._repair_drift()
        return done

    def _rebuild_into(
        self, staged: VectorIndex, progress: Progress | None, total: int, embedded: list[str]
    ) -> int:
        done = 0
        with WriteBehind() as behind:  # batch n written while batch n+1 embeds
            for kind in KINDS:
                position = 0
                while not self._stop.is_set():
                    position, items = self.store.indexable(kind, position, self.batch)
                    if not items:
                        break
                    pairs = list(zip(items, self._vectors(kind, items), strict=True))
                    ids = [i.text_id for i in items]
                    behind.submit(partial(self._add, staged, kind, pairs), ids)
                    embedded += ids  # marked only after the swap, once every write is in
                    done += len(items)
                    self._report("re-indexing memory", progress, done, max(total, done))
        return done

    def _repair_drift(self) -> None:
        """Texts forgotten while a rebuild ran left vectors behind: drop them."""
        for kind in KINDS:
            drift = measure(self.store, self.index, kind)
            if drift.orphans:
                self.index.delete(kind, text_ids=list(drift.orphans))

    # -- the background thread ------------------------------------------------------------

    def start(self, progress: Progress | None = None) -> None:
        """Run in the background until `stop`; `wake` makes it look for new texts at once."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, args=(progress,), name="seelen-indexer", daemon=True
            )
            self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the background thread runs (no I/O)."""
        return self._thread is not None

    def wake(self) -> None:
        """Tell the background thread a new text is waiting."""
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the background thread has caught up (repair, re-index, new texts);
        False if it has not within `timeout` seconds."""
        return self._idle.wait(timeout)

    def _run(self, progress: Progress | None) -> None:
        graphs_checked = False
        while not self._stop.is_set():
            try:
                self.index_all(progress)
                if not graphs_checked:  # once a process, after its first pass (repair)
                    self.repairs += [f"built the graph of {k}" for k in self._build_graphs()]
                    graphs_checked = True
                self.error = None
            except Exception as exc:  # reported by /why and doctor; retried on next wake
                self.error = f"{type(exc).__name__}: {exc}"
            if not self._wake.is_set():
                self._idle.set()
            self._wake.wait(timeout=5.0)
            self._wake.clear()

    def _build_graphs(self) -> list[str]:
        """The graphs the index lacks, built in this (background) thread while `working()`:
        an owner does not rest or leave meanwhile (`ProfileService.busy`)."""
        with self._run_lock:
            return self.index.build_missing_graphs()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (the current batch finishes first)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def forget(self, text_ids: Sequence[str]) -> None:
        """Remove deleted texts' vectors. When the index cannot be written now (damaged),
        the next pass's repair drops them, as vectors whose text is gone from SQLite."""
        if not text_ids:
            return
        try:
            with self._batch_lock:
                self._forgotten.update(text_ids)
                for kind in KINDS:
                    self.index.delete(kind, text_ids=list(text_ids))
        except StoreError as exc:
            kept = "keeps a vector" if len(text_ids) == 1 else "keep a vector"
            self.error = f"{counted(len(text_ids), 'forgotten text')} {kept} until repaired: {exc}"
            self._repaired = False  # the next pass measures again and drops them
        # A summary that quoted a forgotten turn was scrubbed and waits to be embedded again:
        # the background thread does it now, not at its next periodic pass.
        if self._thread is not None:
            self.wake()


def _start(item: Turn | Summary) -> int:
    return item.ts_ms if isinstance(item, Turn) else item.start_ms
