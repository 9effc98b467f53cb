"""When a fact changes: which questions ask about the present, when two turns are versions of
one fact, and how versions move (recall's own use: test_recall.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pytest

from seelen.memory.changes import (
    Versions,
    asks_present,
    asks_then,
    newer_first,
    then_first,
)
from seelen.memory.when import parse_time

NOW = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "present"),
    [
        ("Where do I live now?", "now"),
        ("What diet am I currently on?", "now"),
        ("Who is my partner at the moment?", "now"),
        ("我现在住在哪里？", "now"),
        ("Where do I live?", "tense"),  # the present tense, about the user
        ("Who is my GP?", "tense"),
        ("What's my job?", "tense"),
        ("Where does Lena live?", None),  # not about the user: the rankers decide
        ("What is the book I recommended?", None),  # a word of the past: tense uncertain
        ("Where did I live in March 2024?", None),  # a named past time
        ("Where did I first live after school, and where now?", None),  # "first" wins
    ],
)
def test_a_question_about_the_present_says_so(question: str, present: str | None) -> None:
    assert asks_present(question, parse_time(question, NOW)) == present


def test_only_a_named_past_range_asks_about_then() -> None:
    now_ms = int(NOW.timestamp() * 1000)
    march = parse_time("Where did I live in March 2024?", NOW)
    assert march is not None and asks_then(march, now_ms) == march.end_ms
    assert asks_then(parse_time("Where do I live?", NOW), now_ms) is None
    this_week = parse_time("What did I cook this week?", NOW)  # the range has not ended
    assert asks_then(this_week, now_ms) is None
    a_day = parse_time("What did I cook on March 4, 2024?", NOW)  # an event, not a state
    assert asks_then(a_day, now_ms) is None


@dataclass(frozen=True)
class Item:
    text_id: str
    start_ms: int
    score: float
    text: str = "I said so."
    role: str = "user"
    sources: dict[str, int] = field(default_factory=dict)


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def vectors_of(close: float, base: float = 0.0) -> dict[str, np.ndarray]:
    """ "old" and "new" at `close` of each other; twelve others unrelated; every vector pulled
    towards one shared direction by `base` (an embedder whose unrelated texts sit at a high
    cosine, as e5's do)."""
    axes = np.eye(15, dtype=np.float32)
    common = axes[14]
    new = close * axes[0] + np.sqrt(1 - close**2) * axes[1]
    raw = {"old": axes[0], "new": new} | {f"talk{i}": axes[2 + i] for i in range(12)}
    return {k: unit(v + base * common) for k, v in raw.items()}


@pytest.mark.parametrize("base", [0.0, 2.0])
def test_versions_are_judged_above_the_usual_closeness(base: float) -> None:
    old = Item("old", 1, 0.05, "I live in Berlin.")
    new = Item("new", 2, 0.01, "We moved, I live in Munich now.")
    told = Item("new", 2, 0.01, "Sven lives in Hamburg.")  # not the user of themselves
    # The same decisions whether unrelated texts sit at cosine 0 or 0.8 (base 2).
    assert Versions(vectors_of(0.5, base)).closeness(old, new) == pytest.approx(0.5, abs=1e-5)
    assert Versions(vectors_of(0.5, base)).closeness(old, new) is not None
    assert Versions(vectors_of(0.5, base)).closeness(old, told) is None
    assert Versions(vectors_of(0.2, base)).closeness(old, new) is None
    assert Versions(vectors_of(0.9, base)).closeness(told, old) is not None  # any two, close


def test_the_newer_version_moves_just_above_the_older_one() -> None:
    items = [
        Item("old", 1, 0.05, "I live in Berlin."),
        Item("talk0", 3, 0.04, "The city council wants to ban cars."),
        Item("new", 2, 0.03, "We moved, I live in Munich now."),
    ]
    moved = newer_first(items, vectors_of(0.5))
    assert [i.text_id for i in moved] == ["new", "old", "talk0"]
    assert moved[0].sources == {"newer": 1} and moved[0].score == pytest.approx(0.05)
    # Not close enough, or no vector to compare: every item keeps its place.
    assert newer_first(items, vectors_of(0.05)) == items
    assert newer_first(items, {"old": vectors_of(0.5)["old"]}) == items


def test_for_a_past_time_the_version_that_held_then_moves_above_a_later_one() -> None:
    items = [
        Item("new", 20, 0.05, "We moved, I live in Munich now."),
        Item("talk0", 15, 0.04, "The city council wants to ban cars."),
        Item("old", 1, 0.03, "I live in Berlin."),
    ]
    moved = then_first(items, vectors_of(0.5), end_ms=10)
    assert [i.text_id for i in moved] == ["old", "new", "talk0"]
    assert moved[0].sources == {"then": 1}
    # A range that ends after both: nothing said after it, nothing moves.
    assert then_first(items, vectors_of(0.5), end_ms=30) == items
