"""How the rankers' lists become one ranking.

Reciprocal-rank fusion: score = Σ weight × share / (60 + rank), where `share` is 1 for a
vector hit and, for a BM25 hit, how much of the question the turn holds (the share of the
question's word weight it carries, `Store.word_shares`). A question that asks what the
assistant said ("which films did you recommend?") then lifts the assistant's replies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

RRF_K = 60
# Half a first-place vote, in rank-fusion units: a lift that wins against texts matching
# about as well, never one that lifts an unrelated text over a real match (as the time lift).
HALF_VOTE = 0.5 / (RRF_K + 1)

# BM25 hits under half the best score share only incidental words with the question;
# measured on bench/bench_recall.py, dropping them lifts MRR without losing recall.
BM25_FLOOR = 0.5
# The weights of recall's other lists (recall.py), in votes: the direct searches ("bm25",
# "vector") count 1.0 each.
# Weight of the searches inside the sessions whose summaries matched, relative to the direct
# searches (1.0). At 1.0 these were two extra full votes: on an outside benchmark 5.3 of 6
# recalled turns came from those sessions, crowding out the turn both direct rankers put
# first. Half a vote each lifts a session's turns past near ties without outvoting the
# direct search. Synthetic sweep (bench/bench_recall.py, hybrid MRR@10 / R@10):
# 0 → 0.42 / 0.84, 0.25 → 0.52 / 0.84, 0.5 → 0.53 / 0.84, 1.0 → 0.62 / 0.86; its summaries
# restate each planted fact verbatim, which flatters 1.0, so the real-data failure decides.
SESSION_WEIGHT = 0.5
# A question that names a time ("on March 4", "last week") also searches the turns of the
# sessions of that time: a day's "I made risotto tonight" shares no word with "what did I
# cook on March 4?" and is one of dozens like it, so it is not among the direct searches'
# candidates for the time lift to act on. A full vote, as a direct search: the question asks
# about that time. Synthetic time questions R@10 0.29 → 0.74 (half a vote: 0.45); MemoryBank
# unchanged (its questions name no dates); no other category moved.
TIME_SEARCH_WEIGHT = 1.0
# The search among the turns of the one speaker a question names (speakers.py): half a vote,
# as inside the sessions, not tuned (a full vote, measured after the choice on LoCoMo dev,
# lowered session R@5 .869 -> .863 and single-hop R@prompt .952 -> .950).
SPEAKER_WEIGHT = SESSION_WEIGHT
LIST_WEIGHTS = {  # searched inside the sessions whose summaries matched, and inside a time
    "bm25_in_sessions": SESSION_WEIGHT,
    "vector_in_sessions": SESSION_WEIGHT,
    "bm25_in_whole": SESSION_WEIGHT,  # the best sessions as wholes (whole.py), as summaries'
    "vector_in_whole": SESSION_WEIGHT,
    "bm25_in_time": TIME_SEARCH_WEIGHT,
    "vector_in_time": TIME_SEARCH_WEIGHT,
    "vector_speaker": SPEAKER_WEIGHT,
}

Fused = list[tuple[str, float, dict[str, int]]]  # (text_id, score, {ranker: rank}), best first
Scored = list[tuple[str, float]]  # (text_id, score), best first


def fuse(
    ranked: Mapping[str, Sequence[str]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    shares: Mapping[str, float] | None = None,
) -> Fused:
    """Reciprocal-rank fusion: score = Σ weight × share / (k + rank); best first, with each
    id's ranks. `shares` scales the votes of the BM25 lists (names starting "bm25") per id."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in ranked.items():
        weight = (weights or {}).get(name, 1.0)
        scaled = shares is not None and name.startswith("bm25")
        for rank, text_id in enumerate(ids, start=1):
            share = shares.get(text_id, 0.0) if scaled and shares is not None else 1.0
            scores[text_id] = scores.get(text_id, 0.0) + weight * share / (k + rank)
            ranks.setdefault(text_id, {})[name] = rank
    order = sorted(scores, key=lambda i: scores[i], reverse=True)
    return [(i, scores[i], ranks[i]) for i in order]


def strong_hits(pairs: Sequence[tuple[str, float]], floor: float) -> Scored:
    """The BM25 hits scoring at least `floor` × the best score (drops incidental matches)."""
    if not pairs:
        return []
    best = pairs[0][1]
    return [(text_id, score) for text_id, score in pairs if score >= floor * best]


# "What did you recommend?", "you once told me", "你给我推荐过…", "你给了我什么建议": the
# assistant as the one who said it. "Do you remember me saying…" and "我和你推荐过…" (I told
# you) are not: the verb must follow "you" (or 你, not as an object) closely.
_YOU = re.compile(
    r"\byou (?:(?:have|had|once|ever|just|also|previously|already) )*"
    r"(?:recommend|suggest|told|tell|taught|teach|shar|gave|give|advi[cs]e|mention|said|say|"
    r"introduc|explain|offer|show|propos|came up|come up)",
    re.IGNORECASE,
)
_YOU_ZH = re.compile(
    r"(?<![和跟给向对为帮])你(?:曾经|之前|以前|上次|也|都|还|曾)*"
    r"(?:[给跟向对为和][了过]?我[了过]?)?[^，。？！你我]{0,4}?"
    r"(?:推荐|建议|介绍|告诉|分享|教|说|提供|讲|意见)"
)


def asks_assistant(question: str) -> bool:
    """True when the question asks what the assistant said, suggested or recommended."""
    return bool(_YOU.search(question) or _YOU_ZH.search(question))


def lift_replies(fused: Fused, replies: Mapping[str, str], assistant: set[str]) -> Fused:
    """For a question about the assistant's words: each reply in `replies` (user turn → the
    assistant turn answering it) ranks at least as high as the turn it answers (a request
    like "any board game for four?" matches the question; its answer often does not), and
    every assistant turn gains half a vote (ranked as "you": 1). Best first again."""
    scores = {i: s for i, s, _ in fused}
    ranks = {i: dict(r) for i, _, r in fused}
    for asked, reply in replies.items():
        if asked in scores and scores.get(reply, 0.0) < scores[asked]:
            scores[reply] = scores[asked]
            ranks[reply] = {**ranks.get(reply, {}), "reply": 1}
    for text_id in scores:
        if text_id in assistant:
            scores[text_id] += HALF_VOTE
            ranks[text_id]["you"] = 1
    order = sorted(scores, key=lambda i: scores[i], reverse=True)
    return [(i, scores[i], ranks[i]) for i in order]


def spread_to_neighbours(
    fused: Fused, around: Mapping[str, tuple[str | None, str | None]], share: float
) -> Fused:
    """Each turn in `around` (id → its previous and next spoken turn) passes `share` of its
    score to those neighbours: a neighbour gains the most it is offered (ranked as "near":
    the rank of the turn that offered it), and one found by no ranker joins the ranking.
    Best first again; exact ties keep their order."""
    scores = {i: s for i, s, _ in fused}
    ranks = {i: dict(r) for i, _, r in fused}
    place = {i: n for n, (i, _, _) in enumerate(fused, start=1)}
    gains: dict[str, tuple[float, int]] = {}
    for text_id, pair in around.items():
        offered = share * scores.get(text_id, 0.0)
        for near in pair:
            if near is not None and offered > gains.get(near, (0.0, 0))[0]:
                gains[near] = (offered, place.get(text_id, 0))
    for near, (gain, rank) in gains.items():
        scores[near] = scores.get(near, 0.0) + gain
        ranks[near] = {**ranks.get(near, {}), "near": rank}
    order = sorted(scores, key=lambda i: scores[i], reverse=True)
    return [(i, scores[i], ranks[i]) for i in order]
