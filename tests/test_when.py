"""Times named in questions, parsed relative to now in the user's timezone."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from seelen.memory.when import parse_time

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 25, 9, 30, tzinfo=BERLIN)  # a Wednesday


def day_range(text: str) -> tuple[str, str]:
    """The parsed range as local dates, [first day, day after)."""
    hint = parse_time(text, NOW)
    assert hint is not None and hint.start_ms is not None and hint.end_ms is not None
    start = datetime.fromtimestamp(hint.start_ms / 1000, BERLIN)
    end = datetime.fromtimestamp(hint.end_ms / 1000, BERLIN)
    assert start.hour == 0 and end.hour == 0  # local midnights, not UTC ones
    return start.strftime("%Y-%m-%d"), end.strftime("%Y-%m-%d")


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what did I say yesterday?", ("2026-11-24", "2026-11-25")),
        ("what did we cook last week", ("2026-11-16", "2026-11-23")),
        ("where was I in May?", ("2026-05-01", "2026-06-01")),
        ("my plans for December", ("2025-12-01", "2026-01-01")),  # not yet: last year's
        ("what happened on March 3", ("2026-03-03", "2026-03-04")),
        ("the 2025-02-28 meeting", ("2025-02-28", "2025-03-01")),
        ("what did I do on 20 July 2023?", ("2023-07-20", "2023-07-21")),
        ("the talk on May 8, 2023", ("2023-05-08", "2023-05-09")),
        ("the 3rd of March", ("2026-03-03", "2026-03-04")),
        ("where was I in June 2024", ("2024-06-01", "2024-07-01")),
        ("what did I read in 2023?", ("2023-01-01", "2024-01-01")),
        ("two weeks ago", ("2026-11-11", "2026-11-18")),
        ("last month", ("2026-10-01", "2026-11-01")),
        ("我昨天说了什么？", ("2026-11-24", "2026-11-25")),
        ("上周我做了什么菜", ("2026-11-16", "2026-11-23")),
        ("我五月去了哪里", ("2026-05-01", "2026-06-01")),
        ("十二月的计划", ("2025-12-01", "2026-01-01")),
    ],
)
def test_named_times_become_local_day_ranges(question: str, expected: tuple[str, str]) -> None:
    assert day_range(question) == expected


def test_first_and_last_are_orders_and_plain_questions_name_no_time() -> None:
    assert parse_time("When did I first mention my bike?", NOW).order == "first"
    assert parse_time("What is my most recent job?", NOW).order == "last"
    assert parse_time("I may go to the cinema", NOW) is None  # "may" the verb
    assert parse_time("What is my cat called?", NOW) is None
    assert parse_time("what happened on February 30", NOW) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("在5月2号我买了一件连衣裙，它的颜色是？", ("2026-05-02", "2026-05-03")),
        ("4月27日我们聊了什么", ("2026-04-27", "2026-04-28")),
        ("十二月三十一日的计划", ("2025-12-31", "2026-01-01")),
        ("五月二十七号我在哪", ("2026-05-27", "2026-05-28")),
        ("十月十号", ("2026-10-10", "2026-10-11")),
    ],
)
def test_chinese_dates_name_a_day(question: str, expected: tuple[str, str]) -> None:
    assert day_range(question) == expected
