"""Recall: past summaries and turns by meaning (vectors) and by words (BM25), fused.

First the `session_num` most relevant summaries of *other* sessions, then the turns: found by
direct turn search, ranked lists fused by reciprocal rank (score = Σ weight × share /
(60 + rank), a BM25 vote scaled by the share of the question's word weight the turn holds:
fusion.py), lifted for what the question asks (lifts.py: the assistant's replies, the user's
answers; changes.py: for a question about the present, newer versions of a fact first), then
the other turns of the best sessions after them (inside.py), as passages (each turn with the
turns that make it understandable, passages.py) within a token budget (and at most `conv_num`
turns, a safety bound). A matching summary only lifts its session's turns a little (a
low-weight list searched inside its session); it never filters. So do the sessions without a
summary that hold the question's words best as wholes (whole.py). A question that names one
of a transcript's speakers is also searched among that speaker's turns alone (speakers.py),
and one that names a time ("on March 4") inside that time's sessions. Turns come out in the
order they were ranked, with the score they were ranked by. The current session is never
recalled from the index (its turns are in the prompt already).

Vectors never fail a recall: a failed query embedding or vector search falls back to
keywords (BM25) and says so once in `notice`. The `Indexer` (indexer.py) keeps the index in
step with SQLite and repairs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from seelen.errors import SeelenError
from seelen.memory.changes import Where, versions_placed
from seelen.memory.clock import Clock
from seelen.memory.context import RECALL_TOKENS
from seelen.memory.fusion import (
    BM25_FLOOR,
    LIST_WEIGHTS,
    RRF_K,
    Fused,
    Scored,
    asks_assistant,
    fuse,
    strong_hits,
)
from seelen.memory.inside import BEST_SESSIONS, appended, best_sessions, ran_out
from seelen.memory.lifts import NEAR_SHARE, answers_lifted, replies_lifted
from seelen.memory.names import common_names, without
from seelen.memory.passages import PassageFill
from seelen.memory.reads import TurnReads
from seelen.memory.recalled import Passage, RecalledItem, RecallResult, summary_item, turn_item
from seelen.memory.speakers import named_speaker, spoken_by
from seelen.memory.when import TimeHint, in_time_first, parse_time
from seelen.memory.whole import WHOLE_SESSIONS, sessions_by_words
from seelen.models.embed import embed_query
from seelen.store import Store, Turn

if TYPE_CHECKING:
    import numpy as np

    from seelen.models.embed import Embedder
    from seelen.vectors import VectorIndex

P = ParamSpec("P")
R = TypeVar("R")

# A range holding more sessions than this is most of a memory (two months of daily chats):
# searching inside it is a direct search again, so only the time lift applies.
TIME_SESSIONS = 64
MODES = ("hybrid", "bm25", "vector")
__all__ = ["RRF_K", "Passage", "Recall", "RecallResult", "RecalledItem", "fuse"]


class Recall:
    """Finds what the user said before that matters now.

    The rankers run concurrently (SQLite and LanceDB release the GIL; the query is embedded
    meanwhile), so a recall costs about its slowest ranker, not their sum.
    """

    def __init__(
        self,
        store: Store,
        index: VectorIndex | None,
        embedder: Embedder | None,
        *,
        session_num: int = 3,
        conv_num: int = 100,
        token_budget: int = RECALL_TOKENS,
        candidates: int = 30,
        bm25_floor: float = BM25_FLOOR,
        weights: dict[str, float] | None = None,
        clock: Clock | None = None,
        time_sessions: int = TIME_SESSIONS,
        context: str = "brief",
    ) -> None:
        self.store = store
        self.clock = clock or Clock()
        self.index = index
        self.embedder = embedder
        self.session_num = session_num
        self.conv_num = conv_num
        self.token_budget = token_budget
        self.candidates = candidates
        self.bm25_floor = bm25_floor
        self.time_sessions = time_sessions  # 0: no search inside a named time
        self.context = context  # which neighbours a recalled turn brings (passages.py)
        self.near_share = NEAR_SHARE  # 0: neighbours gain nothing from a strong turn
        self.supersede = True  # a newer similar statement above an older one (changes.py)
        self.best_sessions = BEST_SESSIONS  # 0: no second round in the best sessions
        self.whole_sessions = WHOLE_SESSIONS  # 0: sessions not ranked as wholes (whole.py)
        self.names = True  # the names most turns hold left out of the embedded question
        self.speaker = True  # the named speaker's turns searched alone (speakers.py)
        self.weights = {**LIST_WEIGHTS, **(weights or {})}
        self._pool: ThreadPoolExecutor | None = None
        self._told: set[str] = set()  # notices already given
        self._warming: Future[Any] | None = None
        # False (the chat): while `warm` still loads the embedder and LanceDB (~1 s), recall by
        # keywords alone, so a line sent right at start does not wait for them.
        self.wait_for_warm = True

    def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="seelen-recall")
        return self._pool.submit(fn, *args, **kwargs)

    def warm(self, current_session: str | None = None, after: Future[Any] | None = None) -> None:
        """Load the embedding model and LanceDB now, in the background (once `after` is
        done, when given), if there is history.

        Importing LanceDB alone takes over a second; started early, it overlaps with the rest
        of start-up and with the user typing instead of delaying the first reply.
        """
        index, embedder = self.index, self.embedder
        if index is None or embedder is None or not self.store.has_history(current_session):
            return

        def load() -> None:
            if after is not None:
                # `result()`, not `wait([after])`: a future cancelled by `cancel()` (closing
                # before the model import finished) never wakes `wait`, and this pool's thread
                # would then hold the interpreter's exit for ever.
                try:
                    after.result()
                except CancelledError:
                    return
            embedder.embed(["warm up"])
            index.warm()

        self._warming = self._run(load)

    def close(self) -> None:
        """Stop the worker threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def search(
        self,
        query: str,
        current_session: str | None,
        mode: str = "hybrid",
        *,
        conv_num: int | None = None,
    ) -> RecallResult:
        """Recall for `query`, never from `current_session`; `mode` picks the rankers.

        Turns, best first: those chat shows (the best that fit `token_budget`, at most the
        instance's `conv_num`); or, given `conv_num`, that many, with `in_prompt` marking those.
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        started = time.perf_counter()
        if not self.store.has_history(current_session):  # a new user: nothing to load or search
            return RecallResult(query, [], [], time.perf_counter() - started, mode)
        hint = parse_time(query, self.clock.now())
        notices: list[str] = []
        pending, vector = self._direct(query, current_session, mode, notices)
        summaries = self._summaries(self._fuse(self._lists("s:", pending, notices)))
        summaries = in_time_first(summaries, hint)[: self.session_num]
        self._inside(pending, "in_sessions", query, vector, [s.session_id for s in summaries])
        if whole := pending.pop("w:sessions", None):
            self._inside(pending, "in_whole", query, vector, whole.result())
        self._inside(pending, "in_time", query, vector, self._sessions_in(hint, current_session))
        vectors: dict[str, np.ndarray] = {}
        lists = self._lists("t:", pending, notices, vectors)
        fused = self._fuse(lists, self._shares(query, lists))
        direct, reads = fused, TurnReads(self.store)  # each turn read once (reads.py)
        if asks_assistant(query):
            fused = replies_lifted(reads, fused, self._depth(conv_num))
        if self.near_share:  # the user's answers to matching questions lifted (lifts.py)
            fused = answers_lifted(reads, fused, self.near_share)
        ranked = self._ranked(query, fused, conv_num, current_session, hint, vectors, reads)
        fill = PassageFill(reads, budget=self.token_budget, cap=self.conv_num, rule=self.context)
        turns, passages = self._turns(ranked, conv_num, fill)
        if ran_out(ranked, turns, conv_num, self.conv_num):  # the budget outlasted it
            more = self._more(direct, vector, ranked, notices, reads)
            if len(more) > len(ranked):  # filled on from where `ranked` left the passages
                turns, passages = self._turns(more, conv_num, fill)
        seconds = time.perf_counter() - started
        notice = self._notice(notices)
        return RecallResult(query, summaries, turns, seconds, mode, notice, passages)

    def _direct(
        self, query: str, current_session: str | None, mode: str, notices: list[str]
    ) -> tuple[dict[str, Future[Any]], np.ndarray | None]:
        """Start the searches over all other sessions; returns them and the query's vector
        (None when vectors are not used or failed)."""
        n, store = self.candidates, self.store
        pending: dict[str, Future[Any]] = {}
        vectors = mode in ("hybrid", "vector") and self._vectors_usable()
        # Before the word searches hold the store: the embedding waited 2 ms for them at 100k.
        common = common_names(store, query) if vectors else set()  # a transcript's speakers
        meaning = without(query, common) if self.names else query  # names.py
        speaker = named_speaker(common) if self.speaker else None
        if mode in ("hybrid", "bm25"):
            pending["s:bm25"] = self._run(
                store.search_summaries_text, query, n, exclude_session=current_session
            )
            pending["t:bm25"] = self._run(
                store.search_turns_text, query, n, exclude_session=current_session
            )
            if w := self.whole_sessions:  # sessions ranked as wholes (whole.py)
                pending["w:sessions"] = self._run(
                    sessions_by_words, store, query, w, current_session
                )
        vector = self._embed(meaning, notices) if vectors else None
        if vector is not None and self.index is not None:
            pending["s:vector"] = self._run(
                self.index.search, "summaries", vector, n, exclude_session=current_session
            )
            pending["t:vector"] = self._run(
                self.index.search, "turns", vector, n, exclude_session=current_session
            )
            if speaker is not None:  # that speaker's turns alone (speakers.py)
                args = (store, self.index, vector, speaker, n, current_session)
                pending["t:vector_speaker"] = self._run(spoken_by, *args)
        return pending, vector

    def _inside(
        self,
        pending: dict[str, Future[Any]],
        name: str,
        query: str,
        vector: np.ndarray | None,
        sessions: list[str],
    ) -> None:
        """Start the turn searches limited to `sessions` (those whose summaries matched, or
        those of a time the question names), as the lists `bm25_<name>` and `vector_<name>`."""
        if not sessions:
            return
        if "t:bm25" in pending:
            pending[f"t:bm25_{name}"] = self._run(
                self.store.search_turns_text, query, self.candidates, only_sessions=sessions
            )
        if vector is not None and self.index is not None:
            pending[f"t:vector_{name}"] = self._run(
                self.index.search, "turns", vector, self.candidates, only_sessions=sessions
            )

    def _sessions_in(self, hint: TimeHint | None, current_session: str | None) -> list[str]:
        """The sessions with turns in the range a question names; none when it names no
        range, or one so wide that it holds more than `time_sessions` sessions."""
        if hint is None or hint.start_ms is None or hint.end_ms is None or not self.time_sessions:
            return []
        found = self.store.sessions_in_time(
            hint.start_ms, hint.end_ms, self.time_sessions + 1, current_session
        )
        return found if len(found) <= self.time_sessions else []

    def _embed(self, query: str, notices: list[str]) -> np.ndarray | None:
        """The query's vector, or None (noted in `notices`) when the embedder fails."""
        assert self.embedder is not None, "called only when vectors are usable"
        try:
            return embed_query(self.embedder, query)
        except SeelenError as exc:
            notices.append(str(exc))
            return None

    def _notice(self, notices: list[str]) -> str:
        """One line about a vector search left out; each cause is told once per process."""
        fresh = [n for n in dict.fromkeys(notices) if n not in self._told]
        self._told.update(fresh)
        if not fresh:
            return ""
        return f"recall used keywords only: {fresh[0]}"

    def _fuse(self, lists: dict[str, Scored], shares: dict[str, float] | None = None) -> Fused:
        """One ranking from the rankers' lists; `shares` scales BM25's votes (fusion.py)."""
        ranked = {name: [i for i, _ in hits] for name, hits in lists.items()}
        return fuse(ranked, weights=self.weights, shares=shares)

    def _shares(self, query: str, lists: dict[str, Scored]) -> dict[str, float]:
        """How much of the question each BM25 hit holds (`Store.word_shares`)."""
        found = {i for name, hits in lists.items() if name.startswith("bm25") for i, _ in hits}
        return self.store.word_shares(query, found)

    def _depth(self, limit: int | None) -> int:
        """How many fused candidates are read: those listed, and at least twice the depth of
        one ranker (the passages are filled from them)."""
        return max(limit or 0, self.candidates * 2)

    def _lists(
        self,
        prefix: str,
        pending: dict[str, Future[Any]],
        notices: list[str],
        vectors: dict[str, np.ndarray] | None = None,
    ) -> dict[str, Scored]:
        """Collect one stage's ranked id lists (BM25 lists cut at the score floor), and the
        vector hits' vectors into `vectors`. A vector search that failed is left out and its
        error noted in `notices`: keywords alone still recall."""
        lists = {}
        for key, future in pending.items():
            if not key.startswith(prefix):
                continue
            name = key[len(prefix) :]
            try:
                result = future.result()
            except SeelenError as exc:
                if name.startswith("bm25"):
                    raise
                notices.append(str(exc))
                continue
            if name.startswith("bm25"):
                lists[name] = strong_hits(result, self.bm25_floor)
            else:
                lists[name] = [(hit.text_id, hit.score) for hit in result]
                if vectors is not None:
                    vectors.update((h.text_id, h.vector) for h in result if h.vector is not None)
        return lists

    def _vectors_usable(self) -> bool:
        warm = self.wait_for_warm or self._warming is None or self._warming.done()
        return self.index is not None and self.embedder is not None and warm

    def _summaries(self, fused: Fused) -> list[RecalledItem]:
        found = self.store.get_summaries(i for i, _, _ in fused)  # a deleted text: skipped
        return [summary_item(found[i], score, ranks) for i, score, ranks in fused if i in found]

    def _more(
        self,
        fused: Fused,
        vector: np.ndarray | None,
        ranked: list[RecalledItem],
        notices: list[str],
        reads: TurnReads,
    ) -> list[RecalledItem]:
        """`ranked` followed by the turns it lacks found by meaning inside the sessions of the
        best `fused` turns (inside.py); `ranked` alone when that search failed (noted)."""
        if vector is None or self.index is None or not self.best_sessions:
            return ranked
        head = [i for i, _, _ in fused[: self.candidates]]
        if not (best := best_sessions(reads, head, self.best_sessions)):
            return ranked
        try:
            hits = self.index.search("turns", vector, self.candidates, only_sessions=best)
        except SeelenError as exc:
            notices.append(str(exc))
            return ranked
        return appended(reads, ranked, hits)

    def _ranked(
        self,
        query: str,
        fused: Fused,
        limit: int | None,
        current_session: str | None,
        hint: TimeHint | None,
        vectors: dict[str, np.ndarray],
        reads: TurnReads,
    ) -> list[RecalledItem]:
        """The fused turns as recalled items, best first: those of a time the question names
        lifted, and for a question about the present newer versions of a fact first, for
        one about a past time the versions that held then (changes.py; `vectors` compare
        the turns). Exact score ties (common in rank fusion) go to the newer turn: recency
        only ever breaks ties, so it never pushes a stronger match down."""
        head = fused[: self._depth(limit)]
        found = reads.get_turns(i for i, _, _ in head)
        items = []
        for text_id, score, ranks in head:
            t: Turn | None = found.get(text_id)
            if t is not None and t.session_id != current_session:
                items.append(turn_item(t, score, ranks))
        items = in_time_first(items, hint)
        if not self.supersede:
            return items
        where = Where(self.store, self.index, current_session)
        return versions_placed(query, hint, self.clock.now(), items, vectors, where)

    def _turns(
        self, items: list[RecalledItem], limit: int | None, fill: PassageFill
    ) -> tuple[list[RecalledItem], list[Passage]]:
        """The ranked turns and the passages chat shows. Without `limit`, the turns are the
        recalled ones the passages hold (what chat asks for); with it, the first `limit`, each
        marked `in_prompt` when a passage holds it."""
        items = [i.but(rank=r) for r, i in enumerate(items, 1)]
        passages = fill.fill(items)  # the ranked turns with their context, fitted
        shown = {t.text_id for p in passages for t in p.turns}
        marked = [i.but(in_prompt=i.text_id in shown) for i in items]
        shown_turns = marked[:limit] if limit is not None else [i for i in marked if i.in_prompt]
        return shown_turns, passages
