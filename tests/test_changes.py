"""When a fact changes: which questions ask about the present, and how a newer version of a
fact moves above an older one (recall's own use: test_recall.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pytest

from seelen.memory.changes import asks_present, newer_first
from seelen.memory.when import parse_time

NOW = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "present"),
    [
        ("Where do I live now?", True),
        ("What diet am I currently on?", True),
        ("Who is my partner at the moment?", True),
        ("我现在住在哪里？", True),
        ("Where do I live?", False),  # says nothing of time: the rankers decide
        ("Where did I live in March 2024?", False),  # a named past time
        ("Where did I first live after school, and where now?", False),  # "first" wins
    ],
)
def test_a_question_about_the_present_says_so(question: str, present: bool) -> None:
    assert asks_present(question, parse_time(question, NOW)) is present


@dataclass(frozen=True)
class Item:
    text_id: str
    start_ms: int
    score: float
    sources: dict[str, int] = field(default_factory=dict)


def test_a_newer_close_version_moves_just_above_the_older_one() -> None:
    berlin, talk, munich = np.eye(3, dtype=np.float32)
    close = (berlin + 0.8 * munich) / np.linalg.norm(berlin + 0.8 * munich)
    items = [Item("old", 1, 0.05), Item("talk", 3, 0.04), Item("new", 2, 0.03)]
    vectors = {"old": berlin, "talk": talk, "new": close}
    moved = newer_first(items, vectors, similar=0.6)
    assert [i.text_id for i in moved] == ["new", "old", "talk"]
    assert moved[0].sources == {"newer": 1} and moved[0].score == pytest.approx(0.05)
    # Not close enough in meaning, or no vector to compare: every item keeps its place.
    assert newer_first(items, {"old": berlin, "talk": talk, "new": munich}) == items
    assert newer_first(items, {"old": berlin}) == items
