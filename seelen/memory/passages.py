"""Passages: each recalled turn with the turns around it that make it understandable,
fitted to a token budget and grouped by session.

A single turn is often not the evidence: "Yes, twice!" needs the question it answers, and a
question needs its answer. So each ranked turn brings its neighbours in its session (see
`context_of`), overlapping passages merge, and the prompt shows one block per session, in the
order of that session's best turn, each turn in conversation order. The budget is in tokens,
priced with the very lines the prompt prints; a passage too long for what is left gives way to
its turn alone, or to shorter ones below it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from seelen.memory.context import clip, estimate_tokens
from seelen.memory.prompts import GAP_LINE, passage_heading, passage_line
from seelen.memory.recalled import Passage, RecalledItem, turn_item

if TYPE_CHECKING:
    from seelen.store import Store

# Priced once: a heading is the same length every day ("Wednesday" is the longest weekday),
# and a turn's time ("[10:03]") the same length every time.
HEADING_TOKENS = estimate_tokens(passage_heading(datetime(2025, 1, 1)))
GAP_TOKENS = estimate_tokens(GAP_LINE)
# How much of a context turn is shown: its opening says what it is about (a long answer to a
# short question costs otherwise as much as several recalled turns). Hits are never cut.
CONTEXT_CLIP_TOKENS = 120
# Which neighbours a recalled turn brings (`context_of`). The default, "brief": a question
# its answer, and a reply of fewer than BRIEF_TOKENS ("Yes, twice!", "Porto, in May.") the
# turn it answers. R@prompt at 1,500 tokens, none / brief / around: MemoryBank English
# .955 / .965 / .949, synthetic .87 / .87 / .84 (Chinese .965 for none and brief). "short"
# (replies under 16 tokens, the indexer's bound): .965 and .86, as the synthetic set's turns
# are mostly that short and it spent the budget on context. The answer after a statement
# ("around") cost more than it found.
CONTEXTS = ("none", "brief", "question", "reply", "short", "around")
BRIEF_TOKENS = 8
SHORT_TOKENS = 16


def turn_tokens(item: RecalledItem) -> int:
    """What one turn costs in the prompt, as `passage_line` prints it."""
    return estimate_tokens(passage_line("00:00", item.role, item.text))


def context_of(
    hit: RecalledItem, before: RecalledItem | None, after: RecalledItem | None, rule: str
) -> list[RecalledItem]:
    """The neighbours that make `hit` understandable, under `rule` (one of CONTEXTS):
    "around" both; "brief" and "short" the answer to a question and the turn a short reply
    answers ("question" and "reply" one each); "none" nothing."""
    if rule == "around":
        return [t for t in (before, after) if t is not None]
    if rule == "none":
        return []
    out = []
    short = SHORT_TOKENS if rule == "short" else BRIEF_TOKENS
    if before is not None and rule != "question" and estimate_tokens(hit.text) < short:
        out.append(before)
    asks = hit.text.rstrip().endswith(("?", "？"))
    if after is not None and rule != "reply" and asks:
        out.append(after)
    return out


@dataclass
class _Shown:
    """The turns of one session chosen so far."""

    turns: dict[str, RecalledItem]


class PassageFill:
    """Fills the budget with passages, best hit first.

    Not spread over sessions: a session that gave a passage giving the next only when its hit
    outranks others by 1/0.8 or 1/0.6 lowered R@prompt on both benches (README, "Recall,
    measured"), so ranked order alone decides."""

    def __init__(
        self,
        neighbours: Mapping[str, tuple[RecalledItem | None, RecalledItem | None]],
        *,
        budget: int,
        cap: int,
        rule: str = "brief",
    ) -> None:
        self.neighbours = neighbours
        self.budget = budget
        self.cap = cap
        self.rule = rule
        self.used = 0
        self.count = 0
        self.sessions: dict[str, _Shown] = {}  # in the order each first gave a passage

    def fill(self, ranked: Sequence[RecalledItem]) -> list[Passage]:
        """The passages for `ranked` hits (best first), within the budget and the cap."""
        for hit in ranked:
            if self.count >= self.cap:
                break
            self._take(hit)
        return [self._passage(sid, shown) for sid, shown in self.sessions.items()]

    def _take(self, hit: RecalledItem) -> None:
        """Add `hit` with its context if that fits, else alone if that fits."""
        shown = self.sessions.get(hit.session_id)
        if shown is not None and hit.text_id in shown.turns:  # already there as context
            shown.turns[hit.text_id] = hit
            return
        before, after = self.neighbours.get(hit.text_id, (None, None))
        context = [
            c.but(text=clip(c.text, CONTEXT_CLIP_TOKENS), context_for=hit.text_id)
            for c in context_of(hit, before, after, self.rule)
            if shown is None or c.text_id not in shown.turns
        ]
        for turns in ([hit, *context], [hit]) if context else ([hit],):
            cost = sum(turn_tokens(t) for t in turns) + (HEADING_TOKENS if shown is None else 0)
            cost += GAP_TOKENS  # at most one more break in the session's block
            if self.used + cost <= self.budget and self.count + len(turns) <= self.cap:
                self.used += cost
                self.count += len(turns)
                shown = self.sessions.setdefault(hit.session_id, _Shown({}))
                shown.turns.update((t.text_id, t) for t in turns)
                return

    def _passage(self, session_id: str, shown: _Shown) -> Passage:
        turns = tuple(t.but(in_prompt=True) for t in sorted(shown.turns.values(), key=_order))
        gaps = tuple(
            i > 0 and not self._adjacent(turns[i - 1], turns[i]) for i in range(len(turns))
        )
        tokens = HEADING_TOKENS + sum(map(turn_tokens, turns)) + GAP_TOKENS * sum(gaps)
        return Passage(session_id, turns, gaps, tokens)

    def _adjacent(self, first: RecalledItem, second: RecalledItem) -> bool:
        """Whether `second` is the spoken turn right after `first` (as far as known)."""
        after_first = self.neighbours.get(first.text_id, (None, None))[1]
        before_second = self.neighbours.get(second.text_id, (None, None))[0]
        return (after_first is not None and after_first.text_id == second.text_id) or (
            before_second is not None and before_second.text_id == first.text_id
        )


def passages_for(
    store: Store, ranked: Sequence[RecalledItem], *, budget: int, cap: int, rule: str
) -> list[Passage]:
    """The `ranked` turns (best first) with their context under `rule`, fitted to `budget`
    tokens and `cap` turns (`PassageFill`); the neighbours come from `store` in two queries."""
    around = store.spoken_around(i.text_id for i in ranked)
    near = {n for pair in around.values() for n in pair if n is not None}
    turns = store.get_turns(near)
    known = {i.text_id: i for i in ranked}

    def item(text_id: str | None) -> RecalledItem | None:
        if text_id is None:
            return None
        if text_id in known:
            return known[text_id].but(score=0.0, sources={}, rank=0)
        return turn_item(turns[text_id], 0.0, {}) if text_id in turns else None

    neighbours = {tid: (item(b), item(a)) for tid, (b, a) in around.items()}
    return PassageFill(neighbours, budget=budget, cap=cap, rule=rule).fill(ranked)


def _order(item: RecalledItem) -> tuple[int, int]:
    return item.seq, item.start_ms
