"""Sessions ranked as wholes: BM25 over each session's turns taken together.

In a long conversation the right session is found more often than the right turn in it: the
turn that answers ("Yes, and the view from the top was unreal!") shares few words with the
question ("Where did Evan go hiking?"), while its session as a whole holds them (the hike,
the trail's name, in the turns around it). A summary leads recall to such a session; an
imported history (LoCoMo, a ChatGPT export) has none. So the sessions without a summary are
also ranked as documents by BM25 (a word weighs by how few sessions hold it; its count in a
session, the turns holding it, saturates; a session longer than the mean weighs each count
less), and recall searches inside the best of them as it does inside the sessions whose
summaries matched, at the same half vote (recall.py, fusion.py). A summarised session is
left to its summary: ranked by both, it would get that half vote twice.

LoCoMo dev (no summaries): R@prompt .786 -> .819, multi-hop .564 -> .592, session R@5 .808
-> .865, R@10 .634 -> .709, MRR .512 -> .549 (every one of the seven conversations up; 2 or
5 sessions instead of 3: .816 / .812). It costs rankings where near misses share the
question's words: MemoryBank (no summaries) R@5 EN .934 -> .924, CN .940 -> .925, R@prompt
unchanged (EN .995, CN .990); bench_recall.py --quality --no-summaries R@5/R@10/MRR .60/.71/
.44 -> .54/.68/.41, R@prompt .82 both; the summarised synthetic set does not move. 100k
turns: about 2 ms more a recall (the counts are read while the direct searches run).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from seelen.store import Store

# Robertson's usual BM25 constants (saturation k1, length weight b), not tuned here.
K1 = 1.2
B = 0.75
# Sessions searched inside: as many as the summaries recall leads to (RECALL_SESSION_NUM's
# default, 3), so an imported history gets what a summarised one gets; not tuned (checked
# after the choice on LoCoMo dev: 2, 3, 5 sessions give R@prompt .816, .819, .812).
WHOLE_SESSIONS = 3
# The sessions whose length is read (one indexed count for them all): this many times those
# kept, ranked first without their length (length moves a session a few places, not from the
# end of the ranking to its head); chosen for cost, not measured against other values. Twice
# as many are checked for a summary first: in a memory mostly summarised, fewer are searched.
SIZED = 4


def sessions_by_words(store: Store, query: str, n: int, exclude_session: str | None) -> list[str]:
    """The `n` sessions without a summary (never `exclude_session`) that hold the question's
    rarer words best as wholes, best first; none when no word of it is held."""
    names, words = store.session_words(query) if n > 0 else ([], [])
    if not any(len(found) for found, _ in words):
        return []
    count = max(store.count_sessions(), len(names))
    plain = bm25(words, np.ones(len(names)), count)
    if exclude_session in names:
        plain[names.index(exclude_session)] = 0.0
    top = [int(i) for i in np.argsort(-plain, kind="stable")[: 2 * n * SIZED] if plain[i] > 0]
    summarised = store.summarised([names[i] for i in top])
    first = [i for i in top if names[i] not in summarised][: n * SIZED]
    if not first:
        return []
    sizes, mean = store.session_sizes([names[i] for i in first], count)
    lengths = np.ones(len(names))  # only the first's scores are read
    for i in first:
        lengths[i] = sizes.get(names[i], mean) / max(mean, 1.0)
    scores = bm25(words, lengths, count)
    return [names[i] for i in sorted(first, key=lambda i: -scores[i])[:n]]


def bm25(
    words: list[tuple[np.ndarray, np.ndarray]], lengths: np.ndarray, sessions: int
) -> np.ndarray:
    """BM25 of each session, by its length relative to the mean's (`lengths`): `words` gives,
    for each word, the sessions holding it and in how many turns; `sessions`, how many there
    are in all."""
    scores = np.zeros(len(lengths))
    norm = K1 * (1 - B + B * lengths)
    for found, tf in words:
        weight = math.log(1 + (sessions - len(found) + 0.5) / (len(found) + 0.5))
        scores[found] += weight * tf * (K1 + 1) / (tf + norm[found])
    return scores
