"""The text a question is embedded as: without the names most of the memory holds.

A transcript stores each turn under its speaker's name ("Dave: Thanks, Calvin! ..."), so
each of the two names is in half the turns or more, and a question naming one ("What is
Dave's main passion?") is pulled by meaning towards every turn that holds the name rather
than towards the passion. Embedded without it, the question's topic decides (LoCoMo dev,
the vector ranker alone: evidence among the first 60 turns .617 → .713 for multi-hop
questions, .775 → .900 single-hop; evidence the whole ranking missed, .22 → .39 now among
the vector's first 60). The name stays in the word search, where its rarity already
weighs it. A name few turns hold (a friend mentioned now and then) is kept: it tells the
turns about that person apart.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seelen.store import Store

# A name held by at least this share of the memory's turns is left out of the embedded
# question. A quarter, not tuned: a transcript's speakers are each in half the turns or
# more; a person the user talks about, in far fewer.
NAME_SHARE = 0.25
_NAME = re.compile(r"\b[A-Z][\w-]*")


def for_meaning(store: Store, question: str) -> str:
    """`question` without the names (capitalised words, with a possessive "'s") that at
    least NAME_SHARE of the stored turns hold; the question itself when none is, or when
    nothing else would be left."""
    return without(question, common_names(store, question))


def common_names(store: Store, question: str) -> set[str]:
    """The names in `question` (capitalised words but "I") that at least NAME_SHARE of the
    stored turns hold: a transcript's speakers."""
    names = sorted({m[0] for m in _NAME.finditer(question)} - {"I"})
    return store.common_words(names, NAME_SHARE) if names else set()


def without(question: str, names: Collection[str]) -> str:
    """`question` without `names` (each with a possessive "'s"); the question itself when
    there are none, or when nothing else would be left."""
    if not names:
        return question
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    text = re.sub(rf"\b(?:{alternatives})(?:['’]s)?\b", "", question)
    text = re.sub(r"\s+([?.!,])", r"\1", re.sub(r"\s{2,}", " ", text)).strip()
    return text if re.search(r"\w", text) else question
