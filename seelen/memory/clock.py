"""The current time in the user's timezone, and how stored timestamps are shown."""

from __future__ import annotations

from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo


class Clock:
    """Knows the timezone (TIMEZONE, or this machine's) and formats millisecond timestamps."""

    def __init__(self, timezone: str = "") -> None:
        self.tz: tzinfo | None = ZoneInfo(timezone) if timezone else None

    def now(self) -> datetime:
        """The current time, timezone-aware."""
        return datetime.now(self.tz).astimezone(self.tz)

    def at(self, ms: int) -> datetime:
        """A stored millisecond timestamp as an aware datetime in this zone."""
        return datetime.fromtimestamp(ms / 1000, self.tz).astimezone(self.tz)

    def fmt(self, ms: int, *, seconds: bool = False) -> str:
        """'2026-11-21 23:40' (with seconds when asked)."""
        return self.at(ms).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")

    def fmt_range(self, start_ms: int, end_ms: int) -> str:
        """'2026-11-21 23:40 – 23:58', or with both dates when they differ."""
        start, end = self.at(start_ms), self.at(end_ms)
        tail = end.strftime("%H:%M") if start.date() == end.date() else self.fmt(end_ms)
        return f"{self.fmt(start_ms)} – {tail}"
