"""The memory calls that read: recall's ranking, the newest sessions, the profile, the notes,
how far the vector index is. Each takes its request and answers its result class; bad input
is `BadInput` with one sentence."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from seelen.errors import SeelenError
from seelen.memory.persona import PERSONA, PROFILE
from seelen.protocol import calls
from seelen.protocol.results import (
    IndexState,
    MemoryItem,
    NoteResult,
    ProfileInfo,
    SearchResult,
    SessionInfo,
    SessionList,
)
from seelen.store import EPHEMERAL, now_ms

if TYPE_CHECKING:
    from seelen.app import App
    from seelen.memory.explain import Ranking

# The most turns a search lists: beyond recall's fused candidates (30 per ranker, a few
# rankers) the list holds nothing a ranker found.
MAX_LIMIT = 200
# With `since`/`until`, the ranking is taken this deep before the window is applied: all of
# recall's fused candidates (30 per ranker), so the window never hides a candidate it holds.
WINDOW_DEPTH = 200


class BadInput(SeelenError):
    """A memory call whose arguments cannot be answered (said in one sentence)."""


def search(app: App, ranking: Ranking, request: calls.Search) -> SearchResult:
    """Recall's ranking for the query as the chat ranks it (`limit` turns, with the prompt's
    context turns), optionally within [since, until]."""
    query = request.query.strip()
    if not query:
        raise BadInput("give a query: the words or question to look for in memory")
    if request.mode not in ("hybrid", "bm25", "vector"):
        raise BadInput(f"mode must be hybrid, bm25 or vector, not {request.mode!r}")
    limit = None if request.limit is None else _limit(request.limit, "limit")
    start = _moment(app, request.since, "since", end=False)
    end = _moment(app, request.until, "until", end=True)
    if start is not None and end is not None and start > end:
        raise BadInput("since must not be later than until")
    if start is None and end is None:
        return ranking.search(query, limit, request.mode)
    found = ranking.search(query, WINDOW_DEPTH, request.mode)
    turns = _within(found.turns, start, end)
    return replace(
        found,
        summaries=_within(found.summaries, start, end),
        turns=turns if limit is None else turns[:limit],
        since=request.since,
        until=request.until,
    )


def recent_sessions(app: App, request: calls.ListSessions) -> SessionList:
    """The newest sessions, newest first, with their dates and summaries."""
    n = _limit(request.n, "n")
    store, at = app.store, app.clock.at
    sessions = [s for s in store.list_sessions(n + 5) if s.status != EPHEMERAL][:n]
    out = []
    for session in sessions:
        summary = store.session_summary(session.session_id)
        out.append(
            SessionInfo(
                session_id=session.session_id,
                status=session.shown_status,
                start=at(session.start_ms).isoformat(timespec="milliseconds"),
                end=None
                if session.end_ms is None
                else at(session.end_ms).isoformat(timespec="milliseconds"),
                turns=session.conv_count,
                summary=summary.text if summary else session.rolling_summary,
                summary_id=summary.text_id if summary else None,
            )
        )
    return SessionList(sessions=out)


def profile(app: App) -> ProfileInfo:
    """The user's profile and the assistant's persona, and which memory this is."""
    files, settings = app.files, app.settings
    return ProfileInfo(
        profile=files.read(PROFILE),
        persona=files.read(PERSONA),
        name=settings.profile,
        data_dir=str(settings.data_dir),
        sessions=app.store.count_sessions(),
        turns=app.store.count_turns(),
    )


def search_notes(app: App, request: calls.SearchNotes) -> NoteResult:
    """The best passages of the knowledge folders, within the tool-result budget."""
    query = request.query.strip()
    if not query:
        raise BadInput("give a query: the words or question to look for in the notes")
    knowledge = app.knowledge
    if knowledge is None:
        raise BadInput(
            "this profile has no knowledge folders (add one with `seelen knowledge add DIR`)"
        )
    limit = _limit(request.limit, "limit")
    found = knowledge.search(query, app.settings.tool_result_chars // 4)[:limit]
    return NoteResult(query=query, passages=found)


def index_state(app: App) -> IndexState:
    """How many texts still wait for their vectors."""
    error = app.index.error if app.index is not None else ""
    return IndexState(unindexed=app.store.count_unindexed(), error=error or "")


def _limit(value: int, name: str) -> int:
    if not 1 <= value <= MAX_LIMIT:
        raise BadInput(f"{name} must be between 1 and {MAX_LIMIT}, not {value}")
    return value


def _moment(app: App, value: str | None, name: str, *, end: bool) -> datetime | None:
    """An ISO date or time in TIMEZONE; a date alone means its whole day."""
    if value is None or not value.strip():
        return None
    zone = app.clock.at(now_ms()).tzinfo
    try:
        if len(value.strip()) == 10:
            day = date.fromisoformat(value.strip())
            moment = datetime.combine(day, time.min, zone)
            return moment + timedelta(days=1) - timedelta(milliseconds=1) if end else moment
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadInput(
            f"{name} must be an ISO 8601 date or time such as 2024-03-04, not {value!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)


def _within(
    items: list[MemoryItem], start: datetime | None, end: datetime | None
) -> list[MemoryItem]:
    """The items whose time (a summary: its span) meets [start, end]; ranks renumbered."""
    kept: list[MemoryItem] = []
    for item in items:
        first = datetime.fromisoformat(item.time)
        last = datetime.fromisoformat(item.end or item.time)
        if (start is None or last >= start) and (end is None or first <= end):
            kept.append(replace(item, rank=len(kept) + 1))
    return kept
