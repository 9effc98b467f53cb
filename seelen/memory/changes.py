"""When a fact changes: for a question about the present the newest version of a fact ranks
first; for a question about a past time, the version that held then.

"I live in Berlin" (March) and "We moved, I live in Munich now" (September) both match
"Where do I live now?", often the old one better, and the newer one is sometimes found only
far down ("I finished The Bear, now I am obsessed with Severance" shares no word with "What
show am I watching?"). Two turns are versions of one fact when the later is close in meaning
to the earlier (SUPERSEDE_SIMILAR), or when both are the user speaking of themselves ("I",
"my", 我) and somewhat close (SELF_SIMILAR): a changed fact is restated in other words, and
what singles it out is that the user says it of themselves.

A question asks about the present when it says so ("now", "currently", 现在): then each of the
best turns has its newer version moved just above it, searched for by meaning near the
user's best statements when the rankers missed it; nothing else moves. A question in the
present tense about the user ("Which city do I live in?", "Who is my GP?", English only,
with no word of the past and no named time) moves only versions close as any two turns
(TENSE_SIMILAR): such a question is as often about a fact that never changed. A question
that names a past period ("in March 2024") moves the version said before that period ended
just above a version said after it. Only for such questions: in long conversations most
questions are about one event among many alike ("When did Jon lose his job?"), and there the
newer of two similar turns is no better an answer (LoCoMo dev MRR .49 → .37 when every
question without a past time did this).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from seelen.errors import SeelenError
from seelen.memory.recalled import RecalledItem, turn_item
from seelen.memory.when import TimeHint

if TYPE_CHECKING:
    from seelen.store import Store
    from seelen.vectors import VectorHit, VectorIndex

Item = TypeVar("Item", bound=Any)  # a RecalledItem: text_id, role, text, start_ms, score, sources


class Said(Protocol):
    """What telling versions apart reads of a recalled turn."""

    @property
    def text_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def text(self) -> str: ...


# How many of the best turns look for a newer (or, for a past time, older) version of
# themselves among all the ranked candidates: a changed fact's first statement matches the
# question, so it ranks near the top; its newer version may rank anywhere.
SUPERSEDE_TOP = 10
# Closeness (above what is usual for the turn: `Versions`) from which any two turns are taken
# as versions of one fact: main's bare cosine of 0.6 under MiniLM, whose usual (10th
# percentile) cosine among a question's candidates is ~0.08 on bench_changes.py ((0.6 - 0.08)
# / 0.92 = 0.56). Lower lets unrelated newer small talk jump ahead.
SUPERSEDE_SIMILAR = 0.55
# Closeness from which two turns in which the user speaks of themselves are versions of one
# fact: MiniLM's cosine 0.45 by the same reading. bench_changes.py's ten changed facts are
# restated at cosine 0.43-0.65 (median 0.52); its first-person small talk about the same
# topics reaches 0.47, so no threshold separates them. Measured as bare cosines while this
# was built (before the search for later versions): 0.5 moved fewer facts (bench_changes.py
# "now" 6 of 10, present 9 of 20) than 0.45 (7, 13); 0.4 moved more (8, 14) but put fewer
# newest statements first (3 of 10 "now" against 5).
SELF_SIMILAR = 0.4
# For a question about the present, the first SEEDS of the best turns in which the user speaks
# of themselves are each searched by meaning for their LATER_HITS nearest turns: the newer
# version of a fact is close to the old one, not always to the question. Three seeds of ten
# hits, not tuned: at most three small searches (~2-5 ms each at 100k turns), for such
# questions only.
SEEDS = 3
LATER_HITS = 10
# A low percentile, not the median: a small memory has few candidates, most of them related.
USUAL_PERCENTILE = 10
USUAL_MIN = 10  # fewer other candidates tell nothing of what is usual
SUPERSEDE_STEP = 1e-9  # just above: the other version stays right below
# A question in the present tense that does not say "now" ("Which city do I live in?") is as
# often about a fact that never changed, next to later small talk alike (the synthetic set's
# planted facts): there the user's own statements need to be as close as any two turns.
TENSE_SIMILAR = SUPERSEDE_SIMILAR
# The shortest period a question about a past state names: a month (February's 28 days).
THEN_DAYS = 28
DAY_MS = 86_400_000
PRESENT_TENSE = True  # False: only a question that says "now" asks about the present

_NOW = re.compile(
    r"\b(now|currently|current|these days|nowadays|at the moment|at present|anymore)\b"
    r"|现在|目前|如今",
    re.IGNORECASE,
)
# The present tense about the user: "do I", "is my", "am I", "what's my".
_PRESENT = re.compile(r"\b(do|does|am|is|are|have|has)\b|'s\b|'m\b", re.IGNORECASE)
_ME = re.compile(r"\bI\b|\b(my|me|mine|myself)\b", re.IGNORECASE)
# Any word of the past makes the tense uncertain ("What is the book I recommended?"): such a
# question is left to the rankers.
_PAST = re.compile(
    r"\b(did|was|were|had|used to|ever|once|before|ago|previously|originally|then|"
    r"\w+[^e\W]ed|went|told|said|saw|made|got|gave|bought|ate)\b",
    re.IGNORECASE,
)
# The user speaking of themselves (in a turn): a first-person pronoun.
_SELF = re.compile(r"\bI\b|\bI'[mvd]|\b(my|me|mine|myself|we|our)\b|我", re.IGNORECASE)


def asks_present(question: str, hint: TimeHint | None) -> str | None:
    """How a question asks what holds now: "now" when it says so, "tense" when it asks in the
    present tense about the user; None when it does neither or names a range or "first"."""
    if hint is not None and (hint.start_ms is not None or hint.order == "first"):
        return None
    if _NOW.search(question):
        return "now"
    if PRESENT_TENSE and _ME.search(question) and _PRESENT.search(question):
        return None if _PAST.search(question) else "tense"
    return None


def asks_then(hint: TimeHint | None, now_ms: int) -> int | None:
    """The end of the past period a question names (ms), when it names one of at least
    THEN_DAYS: a state is asked of a period ("in March 2024"); a day names an event ("on
    May 23"), one among others that day, which no older version answers better."""
    if hint is None or hint.start_ms is None or hint.end_ms is None or hint.end_ms > now_ms:
        return None
    return hint.end_ms if hint.end_ms - hint.start_ms >= THEN_DAYS * DAY_MS else None


class Versions:
    """Whether two turns are versions of one fact, by their vectors and speakers.

    Closeness is measured above what is usual for the seed: (cosine - m) / (1 - m), with m
    the USUAL_PERCENTILE-th percentile of the seed's cosines to the other candidates that
    have a vector. Embedders place
    unrelated texts at very different cosines (MiniLM ~0.1, e5 ~0.8: bench/recall_data.py's
    small talk), so a bare cosine threshold means something else for each.
    """

    def __init__(
        self,
        vectors: Mapping[str, np.ndarray],
        similar: float | None = None,
        self_similar: float = SELF_SIMILAR,
    ) -> None:
        self.vectors = vectors
        self.similar = SUPERSEDE_SIMILAR if similar is None else similar
        self.self_similar = self_similar
        self._usual: dict[str, float] = {}
        self._stack: np.ndarray | None = None

    def closeness(self, one: Said, other: Said) -> float | None:
        """How close `other` is to `one` (RecalledItems) when they are versions of one
        fact, else None."""
        mine, theirs = self.vectors.get(one.text_id), self.vectors.get(other.text_id)
        if mine is None or theirs is None or one.text_id == other.text_id:
            return None
        usual = self._usual_for(one.text_id, mine)
        close = (float(mine @ theirs) - usual) / max(1.0 - usual, 1e-6)
        if _of_self(one):  # the user's own fact: only the user says another version of it
            return close if close >= self.self_similar and _of_self(other) else None
        return close if close >= self.similar else None

    def _usual_for(self, text_id: str, vector: np.ndarray) -> float:
        if text_id not in self._usual:
            if self._stack is None:
                self._stack = np.stack(list(self.vectors.values()))
            cosines = self._stack @ vector
            others = cosines[cosines < 0.9999]  # not itself (nor its exact copies)
            few = others.size < USUAL_MIN  # a memory of a few turns: the bare cosine
            usual = 0.0 if few else float(np.percentile(others, USUAL_PERCENTILE))
            self._usual[text_id] = usual
        return self._usual[text_id]


def _of_self(item: Said) -> bool:
    return bool(item.role == "user" and _SELF.search(item.text))


@dataclass(frozen=True)
class Where:
    """Where newer versions are looked for: the store, the vector index (None: nowhere) and
    the current session (never searched)."""

    store: Store
    index: VectorIndex | None
    current_session: str | None


def versions_placed(
    question: str,
    hint: TimeHint | None,
    now: datetime,
    items: list[RecalledItem],
    vectors: dict[str, np.ndarray],
    where: Where,
) -> list[RecalledItem]:
    """The ranked `items` with the versions of a fact placed for what `question` asks: the
    newest first for "now" (with newer versions the rankers missed, searched by meaning),
    for the present tense only close versions, the one that held then for a past range."""
    present = asks_present(question, hint)
    if present == "now":
        return newer_first(with_later_versions(items, vectors, where), vectors)
    if present == "tense":
        return newer_first(items, vectors, self_similar=TENSE_SIMILAR)
    if (end_ms := asks_then(hint, int(now.timestamp() * 1000))) is not None:
        return then_first(items, vectors, end_ms)
    return items


def with_later_versions(
    items: list[RecalledItem], vectors: dict[str, np.ndarray], where: Where
) -> list[RecalledItem]:
    """`items` followed by the newer versions of the best of the user's own statements that
    the rankers missed, found by meaning (`later_versions`); `items` alone when there is no
    index or the search fails."""
    if where.index is None or not (seeds := later_seeds(items, vectors)):
        return items
    try:
        found = {
            s: where.index.search(
                "turns", vectors[s], LATER_HITS, exclude_session=where.current_session
            )
            for s in seeds
        }
    except SeelenError:
        return items
    return later_versions(where.store, items, vectors, found)


def later_seeds(items: list[RecalledItem], vectors: Mapping[str, np.ndarray]) -> list[str]:
    """The ids of the first SEEDS of the best SUPERSEDE_TOP items in which the user speaks of
    themselves (and that have a vector): whose newer versions `later_versions` looks for."""
    mine = [i.text_id for i in items[:SUPERSEDE_TOP] if _of_self(i) and i.text_id in vectors]
    return mine[:SEEDS]


def later_versions(
    store: Store,
    items: list[RecalledItem],
    vectors: dict[str, np.ndarray],
    found: Mapping[str, list[VectorHit]],
) -> list[RecalledItem]:
    """`items` followed by the turns of `found` (each seed's nearest turns) they lack that are
    newer versions of that seed (`Versions`), scored 0 (ranked as "later": the rank in that
    search) for `newer_first` to place; their vectors are added to `vectors`."""
    known = {i.text_id: i for i in items}
    fresh = {h.text_id for hits in found.values() for h in hits if h.text_id not in known}
    turns = store.get_turns(fresh)
    for hits in found.values():
        vectors.update((h.text_id, h.vector) for h in hits if h.vector is not None)
    same, out = Versions(vectors), list(items)
    for seed_id, hits in found.items():
        for rank, hit in enumerate(hits, start=1):
            t = turns.get(hit.text_id)
            if t is None or hit.text_id in known or hit.text_id not in vectors:
                continue
            item = turn_item(t, 0.0, {"later": rank})
            seed = known[seed_id]
            if item.start_ms > seed.start_ms and same.closeness(seed, item) is not None:
                out.append(item)
                known[item.text_id] = item
    return out


def newer_first(
    items: list[Item],
    vectors: Mapping[str, np.ndarray],
    top: int = SUPERSEDE_TOP,
    similar: float | None = None,
    self_similar: float = SELF_SIMILAR,
) -> list[Item]:
    """`items` (best first) with a newer version of each of the first `top` (the closest in
    meaning; then its own newer version, and so on) moved just above it (ranked as "newer":
    that item's place) when it ranked below. Best first again; ties keep the order given."""
    same = Versions(vectors, similar, self_similar)
    return _moved(items, same, items[:top], "newer", None)


def then_first(
    items: list[Item],
    vectors: Mapping[str, np.ndarray],
    end_ms: int,
    top: int = SUPERSEDE_TOP,
    similar: float | None = None,
) -> list[Item]:
    """`items` (best first) with, for each of the first `top` said at or after `end_ms`, the
    closest version said before `end_ms` moved just above it (ranked as "then": that item's
    place). Best first again; ties keep the order given."""
    seeds = [i for i in items[:top] if i.start_ms >= end_ms]
    return _moved(items, Versions(vectors, similar), seeds, "then", end_ms)


def _moved(
    items: list[Item], same: Versions, seeds: list[Item], name: str, before_ms: int | None
) -> list[Item]:
    """`items` with, for each seed, its closest other version lifted just above it when it
    ranked below: a version said before `before_ms`, or (None) one said after the seed, whose
    own newer version is then looked for in turn."""
    place = {i.text_id: n for n, i in enumerate(items, start=1)}
    out = {i.text_id: i for i in items}
    queue, seen = list(seeds), {i.text_id for i in seeds}
    while queue:
        seed = out[queue.pop(0).text_id]
        found = [
            (cosine, i)
            for i in items
            if (i.start_ms < before_ms if before_ms is not None else i.start_ms > seed.start_ms)
            and (cosine := same.closeness(seed, i)) is not None
        ]
        if not found:
            continue
        # The version the question matches best; among those only the later search found
        # (score 0), the closest to the seed.
        mover = out[max(found, key=lambda pair: (pair[1].score, pair[0]))[1].text_id]
        if mover.score <= seed.score:
            sources = {**mover.sources, name: place[seed.text_id]}
            out[mover.text_id] = replace(mover, score=seed.score + SUPERSEDE_STEP, sources=sources)
        if before_ms is None and mover.text_id not in seen:
            seen.add(mover.text_id)
            queue.append(mover)
    return sorted(out.values(), key=lambda i: -i.score)
