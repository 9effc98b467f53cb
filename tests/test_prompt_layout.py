"""The prompt's layout: what stays the same from one question to the next comes first, so a
model server's prompt cache (llama.cpp's, an endpoint's) serves it again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from seelen.memory.context import (
    LIVE_REFILL,
    PromptParts,
    build_messages,
    prefix_messages,
    users_words,
    window_start,
)
from seelen.memory.prompts import DatedPassage, DatedText
from seelen.store import Turn

NOW = datetime(2025, 3, 4, 9, 30, tzinfo=UTC)


def conversation(lengths: list[int]) -> list[Turn]:
    """Turns alternating user / assistant, each `length` words long."""
    return [
        Turn(f"t{i}", "s", i, "user" if i % 2 == 0 else "assistant", f"word{i} " * n, i + 1)
        for i, n in enumerate(lengths)
    ]


def parts(live: list[Turn], recalled: str = "", now: datetime = NOW) -> PromptParts:
    passages = [DatedPassage("### 2025-01-02, Thursday", [DatedText("10:00", recalled, "user")])]
    return PromptParts(
        persona="I am Seelen.",
        profile="The user is Ada.",
        session_summary="Ada talked about tea.",
        related_summaries=[DatedText("2025-01-02", f"A session about {recalled}.")],
        related_passages=passages if recalled else [],
        live=live,
        now=now,
        room=300,
    )


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 20), min_size=1, max_size=6).map(lambda xs: xs * 2),
    budget=st.integers(2000, 8000),
    hours=st.integers(0, 5000),
)
def test_the_next_prompt_begins_with_the_last_one_up_to_its_question(
    lengths: list[int], budget: int, hours: int
) -> None:
    """Whatever the next question recalls, and whenever it comes, its prompt shares every
    byte before it with the warm-up sent after the last answer (the window fits here)."""
    turns = conversation([*lengths, 4])  # exchanges, then the new question
    ahead = prefix_messages(parts(turns[:-1]), budget)  # the warm-up after the last answer
    later = NOW + timedelta(hours=hours)
    now = build_messages(parts(turns, "the bakery", later), budget)
    assert now[: len(ahead)] == ahead and len(now) == len(ahead) + 1
    assert "the bakery" in now[-1]["content"] and f"{later:%H:%M}" in now[-1]["content"]
    assert users_words(now[-1]["content"]) == turns[-1].text  # the question itself
    assert not any("Current time" in str(m["content"]) for m in now[:-1])


@given(costs=st.lists(st.integers(1, 400), min_size=1, max_size=60), budget=st.integers(50, 2000))
def test_the_live_window_moves_only_forward_and_in_steps(costs: list[int], budget: int) -> None:
    starts = [window_start(costs[: n + 1], budget) for n in range(len(costs))]
    for n in range(1, len(costs)):
        assert starts[n] >= starts[n - 1]  # never back
        shown = sum(costs[starts[n] : n + 1])
        if starts[n] != starts[n - 1]:  # a step: the turns shown fill at most LIVE_REFILL
            assert shown <= budget * LIVE_REFILL or starts[n] == n
        else:
            assert shown <= budget or starts[n] == n  # the newest turn is always shown
    assert starts[-1] <= len(costs) - 1


def test_one_more_turn_keeps_the_start_until_it_overflows() -> None:
    assert window_start([100] * 8, 1000) == 0
    assert window_start([100] * 10, 1000) == 0
    assert window_start([100] * 11, 1000) == 6  # the newest five fill half
    assert window_start([100] * 15, 1000) == 6  # and the start stays put


def test_the_context_block_opens_the_newest_user_message_only() -> None:
    turns = conversation([3, 3, 3])
    messages = build_messages(parts(turns, "the bakery"), 4000)
    users = [m for m in messages if m["role"] == "user"]
    assert users[0]["content"] == turns[0].text  # an earlier question stays as it was said
    assert users[-1]["content"].startswith("<context>\n## Current time\nTuesday, 2025-03-04")
    assert "the bakery" in users[-1]["content"] and "the bakery" not in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    # With no user message at all, the block ends the system message.
    alone = build_messages(parts([], "the bakery"), 4000)
    assert len(alone) == 1 and alone[0]["content"].endswith("</context>")


def test_apart_the_context_block_is_a_system_message_before_the_newest_question() -> None:
    """For the bundled model: the same prefix, then the block on its own, then the words."""
    turns = conversation([3, 3, 3])
    ahead = prefix_messages(parts(turns[:-1]), 1536)
    messages = build_messages(parts(turns, "the bakery"), 1536, apart=True)
    assert messages[: len(ahead)] == ahead
    block, question = messages[len(ahead) :]
    assert block["role"] == "system" and block["content"].startswith("<context>\n## Current")
    assert "the bakery" in block["content"] and block["content"].endswith("</context>")
    assert question == {"role": "user", "content": turns[-1].text}
