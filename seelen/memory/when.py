"""Times named in a question ("last week", "in May", "yesterday", "上周", "first"), as ranges,
and the lift they give recalled texts in that range.

A small parser on purpose: `dateparser` costs megabytes and a slow import for the dozen forms
people use when they ask about their own past. Everything is relative to `now` in the user's
timezone; a range is [start, end) in milliseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, tzinfo
from typing import Any, TypeVar

Item = TypeVar("Item", bound=Any)  # a RecalledItem: text_id, start_ms, end_ms, score, sources

MONTHS = (
    "january february march april may june july august september october november december"
).split()
_MONTH = {m: i + 1 for i, m in enumerate(MONTHS)} | {m[:3]: i + 1 for i, m in enumerate(MONTHS)}
_ZH_NUM = {c: i for i, c in enumerate("零一二三四五六七八九")}
# "5月", "五月", "5月2日", "4月27号", "十二月三十一日"
_ZH_DATE = re.compile(
    r"(十[一二]|[一二三四五六七八九十]|1[0-2]|[1-9])月"
    r"(?:(3[01]|[12]\d|[1-9]|三十一?|二?十[一二三四五六七八九]?|[一二三四五六七八九])[日号])?"
)
_UNITS = {"day": 1, "week": 7}
_NUMBER = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

# "first"/"last" ask for the original or the newest mention, not a time range.
_FIRST = re.compile(r"\b(first|earliest|originally)\b|最早|第一次", re.IGNORECASE)
_LAST = re.compile(r"\b(most recent(ly)?|latest|last time|recently)\b|最近|最后一次", re.I)


# A question that names a time ("last week", "in May") or asks for the first or the newest
# mention lifts the matching turns and summaries by half a first-place vote: enough to win
# against texts that match the words about as well, never enough to lift an unrelated text
# over a real match (a boost, not a filter). The same half vote as SESSION_WEIGHT, not tuned.
TIME_WEIGHT = 0.5 / (60 + 1)  # in rank-fusion units: Σ weight / (60 + rank)
# "first"/"last" pick among the candidates that match at least this share of the best score:
# the oldest (or newest) of the real matches, not of everything that shares a word.
ORDER_SHARE = 0.5


@dataclass(frozen=True)
class TimeHint:
    """What a question says about time: a range it names, and/or "first" or "last"."""

    start_ms: int | None = None
    end_ms: int | None = None
    order: str | None = None  # "first" | "last"

    def contains(self, ms: int) -> bool:
        """True when `ms` falls inside the named range."""
        return self.start_ms is not None and self.start_ms <= ms < (self.end_ms or ms + 1)


def parse_time(text: str, now: datetime) -> TimeHint | None:
    """The time hint in `text`, or None when it names no time."""
    days = _days(text.lower(), now.date())
    order = "first" if _FIRST.search(text) else "last" if _LAST.search(text) else None
    if days is None and order is None:
        return None
    if days is None:
        return TimeHint(order=order)
    tz = now.tzinfo
    return TimeHint(_ms(days[0], tz), _ms(days[1], tz), order)


def in_time_first(items: list[Item], hint: TimeHint | None) -> list[Item]:
    """Lift the items a time hint asks for by TIME_WEIGHT (ranked as "time": 1 in their
    sources), then sort best first; exact ties go to the newer item."""
    lifted = set()
    if hint is not None and hint.start_ms is not None:
        lifted = {i.text_id for i in items if hint.contains(i.start_ms) or hint.contains(i.end_ms)}
    if hint is not None and hint.order and items:
        best = max(i.score for i in items)
        strong = [i for i in items if i.score >= ORDER_SHARE * best]
        pick = min if hint.order == "first" else max
        lifted.add(pick(strong, key=lambda i: i.start_ms).text_id)
    out = [
        replace(i, score=i.score + TIME_WEIGHT, sources={**i.sources, "time": 1})
        if i.text_id in lifted
        else i
        for i in items
    ]
    return sorted(out, key=lambda i: (-i.score, -i.start_ms))


def _days(text: str, today: date) -> tuple[date, date] | None:
    """[first day, day after the last) of the range named in lowercased `text`."""
    for finder in (_relative_days, _weeks_and_months, _absolute, _chinese):
        found = finder(text, today)
        if found is not None:
            return found
    return None


def _relative_days(text: str, today: date) -> tuple[date, date] | None:
    if re.search(r"\b(the )?day before yesterday\b|前天", text):
        return today - timedelta(2), today - timedelta(1)
    if re.search(r"\byesterday\b|昨天", text):
        return today - timedelta(1), today
    if re.search(r"\btoday\b|\bthis morning\b|今天", text):
        return today, today + timedelta(1)
    m = re.search(r"\b(\d+|a|one|two|three|four|five|six) (day|week)s? ago\b", text)
    if m:
        n = int(m[1]) if m[1].isdigit() else _NUMBER[m[1]]
        start = today - timedelta(n * _UNITS[m[2]])
        return start, start + timedelta(_UNITS[m[2]])
    m = re.search(r"(\d+)天前", text)
    if m:
        start = today - timedelta(int(m[1]))
        return start, start + timedelta(1)
    return None


def _weeks_and_months(text: str, today: date) -> tuple[date, date] | None:
    monday = today - timedelta(today.weekday())
    if re.search(r"\blast week\b|上周|上个?星期|上个?礼拜", text):
        return monday - timedelta(7), monday
    if re.search(r"\bthis week\b|这周|本周|这个?星期", text):
        return monday, monday + timedelta(7)
    first = today.replace(day=1)
    if re.search(r"\blast month\b|上个?月", text):
        return (first - timedelta(1)).replace(day=1), first
    if re.search(r"\bthis month\b|这个?月|本月", text):
        return first, _next_month(first)
    if re.search(r"\blast year\b|去年", text):
        return date(today.year - 1, 1, 1), date(today.year, 1, 1)
    return None


def _absolute(text: str, today: date) -> tuple[date, date] | None:
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", text)
    if m:
        day = _date(int(m[1]), int(m[2]), int(m[3]))
        return (day, day + timedelta(1)) if day else None
    found = _month_named(text)
    if found is None:
        m = re.search(r"\b(?:in|during|since|of) ((?:19|20)\d\d)\b", text)  # "in 2023"
        return (date(int(m[1]), 1, 1), date(int(m[1]) + 1, 1, 1)) if m else None
    return _month_range(today, *found)


def _month_range(
    today: date, month: int, day_of_month: int | None, year: int | None
) -> tuple[date, date] | None:
    """A month, or one day of it; without a year, the latest such month up to today."""
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    if day_of_month:
        day = _date(year, month, day_of_month)
        return (day, day + timedelta(1)) if day else None
    start = date(year, month, 1)
    return start, _next_month(start)


# "may" is also a verb: as a month it needs "in/since/during/of" before it or a day with it.
_MONTH_NAMES = "|".join(sorted(_MONTH, key=len, reverse=True))
_MONTH_PATTERN = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?|(in|since|during|of) )?({_MONTH_NAMES})\b"
    rf"(?: (\d{{1,2}})(?:st|nd|rd|th)?\b)?(?:,? ((?:19|20)\d\d)\b)?"
)


def _month_named(text: str) -> tuple[int, int | None, int | None] | None:
    """(month, day or None, year or None) of the first month named in lowercased `text`:
    "in May", "May 8", "8th of May", "May 8, 2023", "May 2023"."""
    m = _MONTH_PATTERN.search(text)
    while m and m[3] == "may" and not (m[1] or m[2] or m[4] or m[5]):
        m = _MONTH_PATTERN.search(text, m.end())
    if not m:
        return None
    day = m[1] or m[4]
    return _MONTH[m[3]], int(day) if day else None, int(m[5]) if m[5] else None


def _chinese(text: str, today: date) -> tuple[date, date] | None:
    m = _ZH_DATE.search(text)
    if not m:
        return None
    return _month_range(today, _zh_number(m[1]), _zh_number(m[2]) if m[2] else None, None)


def _zh_number(word: str) -> int:
    """1-31 in digits or in Chinese numerals (五, 十二, 二十七, 三十一)."""
    if word.isdigit():
        return int(word)
    if "十" not in word:
        return _ZH_NUM[word]
    tens, _, units = word.partition("十")
    return (_ZH_NUM[tens] if tens else 1) * 10 + (_ZH_NUM[units] if units else 0)


def _next_month(first: date) -> date:
    return date(first.year + (first.month == 12), first.month % 12 + 1, 1)


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:  # "February 30": not a date, so no range
        return None


def _ms(day: date, tz: tzinfo | None) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp() * 1000)
