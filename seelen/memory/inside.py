"""The second round of recall: the other turns of the sessions that rank best.

In a long conversation the right session is found far more often than the right turn in it
(LoCoMo dev: an evidence session among the first ten sessions ranked for .88 of the
questions, an evidence turn among the first ten turns for .63): "Yes, and the view from the
top was unreal!" shares little with "Where did Evan go hiking?", while the turns around it do,
and imported sessions have no summary to lead to them. So when the ranking ends before the
prompt's budget does, the sessions of the best turns (the first BEST_SESSIONS of the direct
searches' fused ranking) are searched again by meaning, alone, and the turns found there that
the ranking lacks join it after every turn it holds: they fill what the budget leaves, never
take a place from a turn the direct searches found. Only then: a memory whose ranking fills
the prompt pays nothing (100k synthetic turns: the search ran for ~1 question in 10).

Appended rather than fused as votes: at half a vote each (the in-session weight of the
summaries' sessions; measured on an older main) they lifted LoCoMo's R@10 (.627 → .664) but
pushed the synthetic set's paraphrases down (R@10 .78 → .69; its best sessions are often
near misses); appended, no ranking above them moves on any set. They only fill what the
budget leaves once the ranking runs out, which on LoCoMo it does (at RECALL_TOKENS 2,600 the
ranking alone filled 1,445 tokens: R@prompt .831; with these turns 1,923 tokens, .866; at
the default 1,500: .780 → .786; the evidence not among the first 60 ranked .194 → .139);
MemoryBank and the synthetic set fill the budget before them and do not move. By words the
same search added nothing: the direct BM25 search already holds the turns that share the
question's rare words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from seelen.memory.fusion import RRF_K
from seelen.memory.recalled import RecalledItem, turn_item

if TYPE_CHECKING:
    from seelen.memory.reads import TurnReads
    from seelen.vectors import VectorHit

# How many sessions are searched again: as many as the summaries shown (RECALL_SESSION_NUM's
# default), not tuned. Their turns found are at most `Recall.candidates` (60), as any search.
BEST_SESSIONS = 3
RANKER = "vector_in_best"


def best_sessions(reads: TurnReads, ranked: Sequence[str], n: int) -> list[str]:
    """The first `n` distinct sessions of the `ranked` turn ids (best first)."""
    found = reads.get_turns(ranked)
    out: list[str] = []
    for text_id in ranked:
        t = found.get(text_id)
        if t is not None and t.session_id not in out:
            out.append(t.session_id)
            if len(out) == n:
                break
    return out


def appended(
    reads: TurnReads, items: Sequence[RecalledItem], hits: Sequence[VectorHit]
) -> list[RecalledItem]:
    """`items` (ranked) followed by the turns of `hits` (best first) they lack. Each is scored
    half a vote at its rank in that search (as a session's turns are where a summary leads),
    never above the turn before it, so the order stays."""
    known = {i.text_id for i in items}
    turns = reads.get_turns(h.text_id for h in hits if h.text_id not in known)
    out = list(items)
    floor = items[-1].score if items else float("inf")
    for rank, hit in enumerate(hits, start=1):
        t = turns.get(hit.text_id)
        if t is None or hit.text_id in known:
            continue
        floor = min(floor, 0.5 / (RRF_K + rank))
        out.append(turn_item(t, floor, {RANKER: rank}))
        known.add(hit.text_id)
    return out


def ran_out(
    ranked: Sequence[RecalledItem], turns: Sequence[RecalledItem], limit: int | None, cap: int
) -> bool:
    """Whether the `ranked` turns ended before the prompt did (every one of them among the
    prompt's `turns`, fewer than its `cap`) or, given a `limit` to list, before that many: only
    then is the second round searched, so a memory whose ranking fills the prompt (most, at
    the default budget) pays nothing for it."""
    if limit is not None:
        return len(ranked) < limit or all(i.in_prompt for i in turns)
    return len(turns) == len(ranked) < cap
