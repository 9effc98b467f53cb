"""From a question to ranked passages that fit a token budget.

1. The question's function words ("how", "is", "the", 我们, 什么: `function_words.py`) are
   dropped: sharing only these, a note is not about the question. Its other terms are
   looked up in the folder's own vocabulary. A term in more than
   half of the chunks is dropped: BM25 gives it no weight anyway. A word the folder does not
   know is replaced by its close spellings that it does know (a typo in a name still finds
   the name). Neighbouring known terms also form a phrase, so a multi-word name ("Elena
   Voss") or a Chinese name (the bigrams 林小 小雨) counts once more where it appears whole.
2. FTS5 ranks chunks by BM25 (rare terms weigh most) over the text, the heading path and
   the file's name.
   A chunk whose title (its own heading, or its file's name) the question names in full is
   about what was asked: its score counts double.
3. The best chunks of each file are merged when they are neighbours, cut around their hits
   when too long, and kept in rank order while they fit the budget.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from seelen.knowledge.function_words import is_function_word
from seelen.knowledge.index import Hit, NoteIndex
from seelen.knowledge.text import fold, is_cjk, terms
from seelen.memory.context import clip, estimate_tokens
from seelen.protocol.results import NotePassage

# Bounds on the work per question, not tuning: the rarest 16 terms carry the evidence of any
# question one types; 60 candidate chunks are ~15 times what a budget holds.
MAX_TERMS = 16
CANDIDATES = 60
# Two chunks per file: enough for a profile's main section plus one more, and it keeps one
# long file from filling the budget alone.
PER_FILE = 2
# A chunk scoring under a quarter of the best one matched only incidental words.
MIN_RELATIVE_SCORE = 0.25
# A passage shorter than this says too little to be worth its heading line.
MIN_PASSAGE_TOKENS = 40
# Edit distance allowed for a word the folder does not know: one for short words (more would
# turn "ring" into "king"), two from seven letters on. Words under four letters are not fuzzed.
FUZZY_MIN_LEN = 4
# A title named in full by the question: the chunk is about the asked subject. Doubling is
# the same judgement as the heading's column weight (a title term is worth two).
TITLE_BOOST = 2.0
# Under this many chunks (a handful of notes) "in more than half of them" is chance, not a
# sign of a common word: a tiny folder keeps such terms when nothing rarer was asked.
SMALL_FOLDER = 20
# A CJK bigram that is less than half as frequent as both bigrams around it in the question
# spans two words (every bigram inside a word occurs at least as often as the word itself):
# "孙平后来" has 孙平 and 后来 but the rare 平后 only where the two happen to meet.
BOUNDARY_RATIO = 0.5


@dataclass(frozen=True)
class QueryPlan:
    """The FTS5 expression for a question, and the terms whose hits a passage is cut around."""

    match: str
    hit_terms: tuple[str, ...]
    asked: frozenset[str] = frozenset()


def plan(index: NoteIndex, question: str) -> QueryPlan | None:
    """Turn a question into an FTS5 query against the folder's vocabulary (None: no term)."""
    asked = [t for t in terms(question) if not is_function_word(t)]
    total = index.chunk_count()
    if not asked or not total:
        return None
    known: dict[str, int] = {}
    common: dict[str, int] = {}
    variants: list[str] = []
    for term in dict.fromkeys(asked):
        freq = index.doc_freq(term)
        if freq == 0:
            variants.extend(fuzzy(index, term))
        else:
            (known if freq <= total / 2 else common)[term] = freq
    if not known and total < SMALL_FOLDER:
        known = common
    for term in _word_boundaries(asked, {**common, **known}):
        known.pop(term, None)
    rarest = sorted(known, key=known.__getitem__)[:MAX_TERMS]
    phrases = _phrases(asked, set(rarest))
    clauses = [_quote(t) for t in (*rarest, *dict.fromkeys(variants))] + phrases
    if not clauses:
        return None
    found = tuple(dict.fromkeys((*rarest, *variants)))
    return QueryPlan(" OR ".join(clauses), found, frozenset(asked) | frozenset(variants))


def _word_boundaries(asked: Sequence[str], freq: dict[str, int]) -> set[str]:
    """CJK bigrams of the question that straddle two words (see `BOUNDARY_RATIO`)."""
    out: set[str] = set()
    for i in range(1, len(asked) - 1):
        left, term, right = asked[i - 1], asked[i], asked[i + 1]
        chained = left[-1:] == term[:1] and term[-1:] == right[:1]
        if not (chained and len(term) == 2 and is_cjk(left + term + right)):
            continue
        if freq.get(term, 0) < BOUNDARY_RATIO * min(freq.get(left, 0), freq.get(right, 0)):
            out.add(term)
    return out


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _phrases(asked: Sequence[str], kept: set[str]) -> list[str]:
    """Runs of two or more neighbouring kept terms, as FTS5 phrases."""
    out: list[str] = []
    run: list[str] = []
    for term in [*asked, ""]:
        if term in kept:
            run.append(term)
            continue
        if len(run) >= 2:
            out.append('"' + " ".join(run) + '"')
        run = []
    return list(dict.fromkeys(out))


def fuzzy(index: NoteIndex, term: str, limit: int = 3) -> list[str]:
    """Known terms within a small edit distance of an unknown word (same first two letters)."""
    if is_cjk(term) or len(term) < FUZZY_MIN_LEN:
        return []
    allowed = 1 if len(term) < 7 else 2
    found: list[tuple[int, int, str]] = []
    for candidate, freq in index.terms_between(term[:2], term[:2] + "\uffff"):
        if abs(len(candidate) - len(term)) > allowed:
            continue
        distance = edit_distance(term, candidate, allowed)
        if distance <= allowed:
            found.append((distance, -freq, candidate))
    return [c for _, _, c in sorted(found)[:limit]]


def edit_distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance with transpositions, or `cap + 1` once it must exceed `cap`."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > cap:
            return cap + 1
        previous2, previous = previous, current
    return previous[-1]


def passages(
    hits: Sequence[Hit], query: QueryPlan, budget: int, show: dict[str, str]
) -> list[NotePassage]:
    """Merge, rank, cut and fit hits into `budget` tokens; `show` maps paths to labels."""
    if not hits:
        return []
    hits = sorted((_titled(h, query) for h in hits), key=lambda h: -h.score)
    floor = hits[0].score * MIN_RELATIVE_SCORE
    by_file: dict[str, list[Hit]] = {}
    for hit in hits:
        group = by_file.setdefault(hit.path, [])
        if hit.score >= floor and len(group) < PER_FILE:
            group.append(hit)
    merged = [p for group in by_file.values() for p in _merge(group, show)]
    merged.sort(key=lambda p: -p.score)
    return _fit(merged, query.hit_terms, budget)


def _titled(hit: Hit, query: QueryPlan) -> Hit:
    """The hit, its score doubled when the question names its heading or file in full."""
    stem = os.path.splitext(os.path.basename(hit.path))[0]
    for title in (hit.heading.rsplit(" › ", 1)[-1], stem):
        words = set(terms(title))
        if words and words <= query.asked and words & set(query.hit_terms):
            return replace(hit, score=hit.score * TITLE_BOOST)
    return hit


def _merge(group: list[Hit], show: dict[str, str]) -> list[NotePassage]:
    """Neighbouring chunks of one file become one passage, in reading order."""
    out: list[NotePassage] = []
    last_seq = -2
    for hit in sorted(group, key=lambda h: h.seq):
        label = show.get(hit.path, hit.path)
        if out and hit.seq == last_seq + 1:
            prev = out[-1]
            text = f"{prev.text}\n\n{hit.body}"
            out[-1] = NotePassage(
                path=label,
                heading=prev.heading,
                text=text,
                score=max(prev.score, hit.score),
                file=hit.path,
            )
        else:
            out.append(
                NotePassage(
                    path=label, heading=hit.heading, text=hit.body, score=hit.score, file=hit.path
                )
            )
        last_seq = hit.seq
    return out


def _fit(ranked: Sequence[NotePassage], hit_terms: Sequence[str], budget: int) -> list[NotePassage]:
    """Keep passages in rank order while they fit; the one that does not fit is cut."""
    kept: list[NotePassage] = []
    left = budget
    for passage in ranked:
        overhead = estimate_tokens(passage.label()) + 6
        room = left - overhead
        if room < MIN_PASSAGE_TOKENS:
            break
        text = passage.text
        if estimate_tokens(text) > room:
            text = cut_around(text, hit_terms, room)
        kept.append(replace(passage, text=text, score=round(passage.score, 3)))
        left -= overhead + estimate_tokens(text)
    return kept


def cut_around(text: str, hit_terms: Sequence[str], tokens: int) -> str:
    """The window of about `tokens` tokens holding the most hits, from a sentence start."""
    lowered = fold(text) if len(fold(text)) == len(text) else text.lower()
    spots = sorted(m.start() for term in hit_terms for m in _finder(term).finditer(lowered))
    width = len(clip(text, tokens))  # characters that fit, from the start
    if not spots or spots[-1] < width:
        return clip(text, tokens)
    best, best_count = 0, -1
    for i, spot in enumerate(spots):
        count = sum(1 for s in spots[i:] if s < spot + width)
        if count > best_count:
            best, best_count = spot, count
    start = _sentence_start(text, best, width // 3)
    return "… " + clip(text[start:], tokens - 1)


def _finder(term: str) -> re.Pattern[str]:
    if is_cjk(term):
        return re.compile(re.escape(term))
    return re.compile(rf"\b{re.escape(term)}\b")


def _sentence_start(text: str, at: int, reach: int) -> int:
    """The start of the sentence holding `at`, looking back at most `reach` characters."""
    floor = max(0, at - reach)
    ends = [m.end() for m in re.finditer(r"[.!?。！？\n]\s*", text[floor:at])]
    return floor + ends[-1] if ends else floor
