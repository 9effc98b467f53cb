"""The turns of the person a question names, searched by meaning among that person's alone.

A transcript (an import of two named people) stores each turn under its speaker's name
("Dave: I restored an old car with my dad."), and most of its questions name one of the two
("What is Dave's main passion?") and are answered by what that person said, often in words
the question does not hold: of the multi-hop and open-domain evidence LoCoMo dev's ranking
missed, 94% is spoken by the person the question names. The question's vector (embedded
without the names, names.py) finds turns of both speakers alike; searched again among the
named speaker's turns alone, the ones that only that person said come up. The list joins the
fusion at half a vote (fusion.SPEAKER_WEIGHT), so it lifts that speaker's turns past near ties
without outvoting the direct searches, which still find what the other speaker said.

The named speaker: the one name in the question that at least NAME_SHARE of the turns hold
(names.py: a transcript's speakers are each in half the turns or more); none when the
question names both speakers or neither, as in a user's own chats with the assistant
(MemoryBank, the synthetic set: nothing changes there). A large memory is judged by its
newest turns (Store.common_words), so a transcript of 100k turns has its speakers too.

LoCoMo dev (bench_locomo.py, against the ranking without it): R@prompt .850 -> .854 (1,214
tokens both), multi-hop .646 -> .661, temporal .852 -> .850, open-domain .522 -> .533,
single-hop .951 -> .952; R@10 .731 -> .751, MRR .558 -> .589, session R@5 .871 -> .869,
evidence missed from the first 60 .109 -> .104. At a full vote: R@prompt .855, R@10 .745,
MRR .594, single-hop .950, session R@5 .863 (measured as a check, not chosen by it).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from seelen.store import Store
    from seelen.vectors import VectorHit, VectorIndex

# The vector index filters by session only, so this many times the candidates are searched
# and the speaker's kept: each of a transcript's two speakers says about half the turns, so
# about twice the candidates are theirs. Not tuned.
SPEAKER_DEPTH = 4


def named_speaker(common: Collection[str]) -> str | None:
    """The speaker a question names, of its names most turns hold (names.common_names): the
    one there is; None when there are none, or more than one."""
    return next(iter(common)) if len(common) == 1 else None


def spoken_by(
    store: Store,
    index: VectorIndex,
    vector: np.ndarray,
    name: str,
    limit: int,
    exclude_session: str | None,
) -> list[VectorHit]:
    """The `limit` turns closest to `vector` among the SPEAKER_DEPTH × `limit` closest that
    `name` speaks (stored as "<name>: ..."), best first; never `exclude_session`'s."""
    hits = index.search("turns", vector, limit * SPEAKER_DEPTH, exclude_session=exclude_session)
    turns = store.get_turns(h.text_id for h in hits)
    prefix = f"{name}:"
    said = [
        h for h in hits if (t := turns.get(h.text_id)) is not None and t.text.startswith(prefix)
    ]
    return said[:limit]
