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

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from seelen.memory.context import clip, estimate_tokens
from seelen.memory.prompts import GAP_LINE, passage_heading, passage_line
from seelen.memory.recalled import Passage, RecalledItem, turn_item

if TYPE_CHECKING:
    from seelen.memory.reads import Around, TurnReads

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
NO_AROUND: tuple[None, None] = (None, None)  # a turn whose neighbours are not known


def turn_tokens(item: RecalledItem) -> int:
    """What one turn costs in the prompt, as `passage_line` prints it."""
    return estimate_tokens(passage_line("00:00", item.role, item.text))


def wanted(hit: RecalledItem, rule: str) -> tuple[bool, bool]:
    """Which neighbours `hit` brings under `rule` (one of CONTEXTS): (the turn before it, the
    turn after it). See `context_of`."""
    if rule == "around":
        return True, True
    if rule == "none":
        return False, False
    short = SHORT_TOKENS if rule == "short" else BRIEF_TOKENS
    before = rule != "question" and estimate_tokens(hit.text) < short
    return before, rule != "reply" and hit.text.rstrip().endswith(("?", "？"))


def context_of(
    hit: RecalledItem, before: RecalledItem | None, after: RecalledItem | None, rule: str
) -> list[RecalledItem]:
    """The neighbours that make `hit` understandable, under `rule` (one of CONTEXTS):
    "around" both; "brief" and "short" the answer to a question and the turn a short reply
    answers ("question" and "reply" one each); "none" nothing."""
    pair = zip((before, after), wanted(hit, rule), strict=True)
    return [turn for turn, wants in pair if wants and turn is not None]


@dataclass
class _Shown:
    """The turns of one session chosen so far."""

    turns: dict[str, RecalledItem]


class PassageFill:
    """Fills the budget with passages, best hit first, reading through `reads` only what it
    needs: the neighbours of each hit, and the turns of those that a hit brings (100k turns:
    ~110 neighbours read a question before, ~20 now).

    Not spread over sessions: a session that gave a passage giving the next only when its hit
    outranks others by 1/0.8 or 1/0.6 lowered R@prompt on both benches (README, "Recall,
    measured"), so ranked order alone decides."""

    def __init__(self, reads: TurnReads, *, budget: int, cap: int, rule: str = "brief") -> None:
        self.reads = reads
        self.budget = budget
        self.cap = cap
        self.rule = rule
        self.used = 0
        self.count = 0
        self.sessions: dict[str, _Shown] = {}  # in the order each first gave a passage
        self.taken: list[str] = []  # the hits filled so far, best first
        self.around: dict[str, Around] = {}  # each hit's spoken neighbours
        self.context: dict[str, RecalledItem] = {}  # the neighbours the hits bring

    def fill(self, ranked: Sequence[RecalledItem]) -> list[Passage]:
        """The passages for `ranked` hits (best first), within the budget and the cap.
        `ranked` may be the ranking of an earlier call with more hits after it (the second
        round of recall appends): the passages are then filled on, as if filled anew."""
        done = len(self.taken)
        if [i.text_id for i in ranked[:done]] != self.taken:
            raise ValueError("a ranking is filled on only when it begins with the one filled")
        new = ranked[done:]
        self.taken += [i.text_id for i in new]
        self._read(new)
        for hit in new:
            if self.count >= self.cap:
                break
            self._take(hit)
        return [self._passage(sid, shown) for sid, shown in self.sessions.items()]

    def _read(self, hits: Sequence[RecalledItem]) -> None:
        """The neighbours of `hits`, and as recalled items those that they bring."""
        self.around.update(self.reads.spoken_around(i.text_id for i in hits))
        known = {i.text_id: i for i in hits}
        brought: set[str] = set()
        for hit in hits:
            pair = zip(self.around.get(hit.text_id, NO_AROUND), wanted(hit, self.rule), strict=True)
            brought.update(near for near, wants in pair if wants and near is not None)
        brought -= self.context.keys()
        turns = self.reads.get_turns(i for i in brought if i not in known)
        for text_id in brought:
            if text_id in known:
                self.context[text_id] = known[text_id].but(score=0.0, sources={}, rank=0)
            elif text_id in turns:
                self.context[text_id] = turn_item(turns[text_id], 0.0, {})

    def _take(self, hit: RecalledItem) -> None:
        """Add `hit` with its context if that fits, else alone if that fits."""
        shown = self.sessions.get(hit.session_id)
        if shown is not None and hit.text_id in shown.turns:  # already there as context
            shown.turns[hit.text_id] = hit
            return
        before, after = self.around.get(hit.text_id, NO_AROUND)
        near = (self.context.get(before or ""), self.context.get(after or ""))
        context = [
            c.but(text=clip(c.text, CONTEXT_CLIP_TOKENS), context_for=hit.text_id)
            for c in context_of(hit, *near, self.rule)
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
        after_first = self.around.get(first.text_id, NO_AROUND)[1]
        before_second = self.around.get(second.text_id, NO_AROUND)[0]
        return after_first == second.text_id or before_second == first.text_id


def _order(item: RecalledItem) -> tuple[int, int]:
    return item.seq, item.start_ms
