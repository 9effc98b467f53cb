"""When a fact changes: a newer statement close in meaning to an older one ranked above it
takes that one's place, for a question about the present.

"I live in Berlin" (March) and "We moved, I live in Munich now" (September) both match
"Where do I live now?", often the old one better. A question that says it asks about the
present ("now", "currently", "these days", 现在, 目前) and names no other time wants the newer of
two such statements, so it moves just above the older one; nothing else moves, and a text
unlike any above it keeps its place. Only when the question says so: in long conversations
most questions are about one event among many alike ("When did Jon lose his job?"), and there
the newer of two similar turns is no better an answer (LoCoMo dev MRR .49 → .37 when every
question without a past time did this).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from seelen.memory.when import TimeHint

if TYPE_CHECKING:
    import numpy as np

Item = TypeVar("Item", bound=Any)  # a RecalledItem: text_id, start_ms, score, sources

# How many of the best turns are compared: a changed fact's two statements both match the
# question, so both rank near the top when either does.
SUPERSEDE_TOP = 10
# Cosine (MiniLM and e5 unit vectors) above which two statements are taken as versions of one
# fact. Measured on bench_changes.py, the synthetic set and MemoryBank (see the docs' recall
# section): lower lets unrelated newer small talk jump ahead.
SUPERSEDE_SIMILAR = 0.6
SUPERSEDE_STEP = 1e-9  # just above: the older statement stays right below


_NOW = re.compile(
    r"\b(now|currently|current|these days|nowadays|at the moment|at present|anymore)\b"
    r"|现在|目前|如今",
    re.IGNORECASE,
)


def asks_present(question: str, hint: TimeHint | None) -> bool:
    """Whether a question asks what holds now: it says so and names no range or "first"."""
    if hint is not None and (hint.start_ms is not None or hint.order == "first"):
        return False
    return bool(_NOW.search(question))


def newer_first(
    items: list[Item],
    vectors: Mapping[str, np.ndarray],
    top: int = SUPERSEDE_TOP,
    similar: float | None = None,
) -> list[Item]:
    """`items` (best first) with each of the first `top` that has a vector moved just above
    the best older item with a vector at least `similar` to its own (ranked as "newer": the
    place of that item). Best first again; ties keep the order given."""
    similar = SUPERSEDE_SIMILAR if similar is None else similar
    head = list(items[:top])
    for j, later in enumerate(head):
        mine = vectors.get(later.text_id)
        if mine is None:
            continue
        for earlier in head[:j]:
            theirs = vectors.get(earlier.text_id)
            if (
                theirs is not None
                and earlier.start_ms < later.start_ms
                and earlier.score >= later.score
                and float(mine @ theirs) >= similar
            ):
                sources = {**later.sources, "newer": head.index(earlier) + 1}
                head[j] = replace(later, score=earlier.score + SUPERSEDE_STEP, sources=sources)
                break
    return sorted(head, key=lambda i: -i.score) + list(items[top:])
