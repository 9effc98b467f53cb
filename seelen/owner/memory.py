"""The memory calls of `seelen mcp`, answered by the profile's owner against its open profile.

Search is recall's own ranking, shown as `seelen memory search --json` shows it (text ids,
ISO times in TIMEZONE, sessions, scores, rankers). Remembered texts are the user's words,
kept in a session of their own per client and day: archived from the start, so they never
enter the chat's live session or its archive, yet recall, `ask` and `memory search` find them
like any past turn (and `memory forget --session` removes a client's day at once). Each is
embedded before the call returns. Bad input is a `Failed` with one sentence.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from seelen.errors import SeelenError
from seelen.memory.explain import Ranking
from seelen.memory.persona import PERSONA, PROFILE
from seelen.owner import wire
from seelen.runtime import forget_text
from seelen.store import ARCHIVED, EPHEMERAL, Session, now_ms

if TYPE_CHECKING:
    from seelen.app import App

# The longest text `remember` keeps. A remembered fact is recalled as one turn, and a turn
# longer than recall's default share of the prompt (12% of CONTEXT_TOKENS, about 3,800
# characters of English at the default 8,000 tokens) is never shown to the model whole; the
# embedder also reads only the first 4,096 characters. So: one fact, or a few, per call.
MAX_REMEMBER_CHARS = 4000
MAX_LIMIT = 100
# With `since`/`until`, the ranking is taken this deep before the window is applied: all of
# recall's fused candidates (30 per ranker), so the window never hides a candidate it holds.
WINDOW_DEPTH = 200
MAX_CLIENT_CHARS = 64
# The day sessions' ids: one per (client, day), the same in every process, so two clients
# (or two calls of one) in the same second find the same session instead of making two.
_DAY_SESSIONS = uuid.UUID("5ee1e2b5-6d63-4b7e-9a59-0c2a54f0a1d1")


class BadInput(SeelenError):
    """A memory call whose arguments cannot be answered (said in one sentence)."""


class MemoryService:
    """Answers the wire's memory calls against one opened profile (the owner's `App`)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._handlers: dict[type, Callable[[Any], dict[str, Any]]] = {
            wire.Search: self.search,
            wire.Remember: self.remember,
            wire.Forget: self.forget,
            wire.RecentSessions: self.recent_sessions,
            wire.GetProfile: self.get_profile,
            wire.SearchKnowledge: self.search_knowledge,
        }

    async def call(self, request: wire.MemoryCall) -> wire.Result | wire.Failed:
        """Run one call in a worker thread (SQLite and LanceDB block); turns go on meanwhile."""
        handler = self._handlers[type(request)]
        try:
            return wire.Result(data=await asyncio.to_thread(handler, request))
        except SeelenError as exc:
            return wire.Failed(message=str(exc))

    # --- reading ---------------------------------------------------------------------------

    def search(self, request: wire.Search) -> dict[str, Any]:
        """Recall's ranking for the query, optionally within [since, until]."""
        query = request.query.strip()
        if not query:
            raise BadInput("give a query: the words or question to look for in memory")
        limit = _limit(request.limit, "limit")
        start = self._moment(request.since, "since", end=False)
        end = self._moment(request.until, "until", end=True)
        if start is not None and end is not None and start > end:
            raise BadInput("since must not be later than until")
        recall = self.app.recall
        if recall is None:
            raise SeelenError("recall is not available in this profile")
        ranking = Ranking(recall, self.app.clock, self.app.settings.context_tokens)
        windowed = start is not None or end is not None
        data = ranking.search(query, WINDOW_DEPTH if windowed else limit)
        if windowed:
            data["summaries"] = _within(data["summaries"], start, end)
            data["turns"] = _within(data["turns"], start, end)
        data["turns"] = data["turns"][:limit]
        data["since"], data["until"] = request.since, request.until
        return data

    def recent_sessions(self, request: wire.RecentSessions) -> dict[str, Any]:
        """The newest sessions, newest first, with their dates and summaries."""
        n = _limit(request.n, "n")
        store, at = self.app.store, self.app.clock.at
        sessions = [s for s in store.list_sessions(n + 5) if s.status != EPHEMERAL][:n]
        out = []
        for session in sessions:
            summary = store.session_summary(session.session_id)
            out.append(
                {
                    "session_id": session.session_id,
                    "status": session.status,
                    "start": at(session.start_ms).isoformat(timespec="milliseconds"),
                    "end": None
                    if session.end_ms is None
                    else at(session.end_ms).isoformat(timespec="milliseconds"),
                    "turns": session.conv_count,
                    "summary": summary.text if summary else session.rolling_summary,
                    "summary_id": summary.text_id if summary else None,
                }
            )
        return {"sessions": out}

    def get_profile(self, _request: wire.GetProfile) -> dict[str, Any]:
        """The user's profile and the assistant's persona."""
        files = self.app.files
        return {"profile": files.read(PROFILE), "persona": files.read(PERSONA)}

    def search_knowledge(self, request: wire.SearchKnowledge) -> dict[str, Any]:
        """The best passages of the knowledge folders, within the tool-result budget."""
        query = request.query.strip()
        if not query:
            raise BadInput("give a query: the words or question to look for in the notes")
        knowledge = self.app.knowledge
        if knowledge is None:
            raise BadInput(
                "this profile has no knowledge folders (add one with `seelen knowledge add DIR`)"
            )
        limit = _limit(request.limit, "limit")
        found = knowledge.search(query, self.app.settings.tool_result_chars // 4)[:limit]
        return {
            "query": query,
            "passages": [
                {"path": p.path, "heading": p.heading, "text": p.text, "score": p.score}
                for p in found
            ],
        }

    # --- writing ---------------------------------------------------------------------------

    def remember(self, request: wire.Remember) -> dict[str, Any]:
        """Keep the text in this client's session of the day, embedded before returning."""
        text = request.text.strip()
        if not text:
            raise BadInput("give the text to remember")
        if len(text) > MAX_REMEMBER_CHARS:
            raise BadInput(
                f"remember keeps at most {MAX_REMEMBER_CHARS:,} characters and this text has "
                f"{len(text):,}: store the gist, or one fact per call"
            )
        client = _client_name(request.client)
        store = self.app.store
        session_id = self._day_session(client)
        turn = next(
            (
                t
                for t in store.turns(session_id)
                if request.key and t.meta.get("key") == request.key
            ),
            None,
        )  # a retried call (its owner died after storing it) is stored once
        if turn is None:
            meta = {"source": "mcp", "client": client, "key": request.key}
            turn = store.add_turn(session_id, "user", text, meta)
            store.mark_archived(session_id)  # the session ends with its newest text
        self.app.index_pending()  # the owner holds the writer lock: embedded before we answer
        return {
            "text_id": turn.text_id,
            "session_id": session_id,
            "time": self.app.clock.at(turn.ts_ms).isoformat(timespec="milliseconds"),
            "role": turn.role,
            "text": turn.text,
            "client": client,
        }

    def _day_session(self, client: str) -> str:
        """The id of `client`'s session of today (in TIMEZONE), created when missing."""
        now = now_ms()
        day = self.app.clock.at(now).date().isoformat()
        session_id = uuid.uuid5(_DAY_SESSIONS, f"{client}\n{day}").hex
        store = self.app.store
        if store.get_session(session_id) is None:  # created once: the import skips known ids
            store.import_records([Session(session_id, now, now, ARCHIVED, 0)], [], [])
        return session_id

    def forget(self, request: wire.Forget) -> dict[str, Any]:
        """Delete one turn or summary (and its vector) by id or unique prefix."""
        prefix = request.text_id.strip()
        matches = self.app.store.find_text_ids(prefix) if len(prefix) >= 4 else []
        count = forget_text(self.app, prefix)  # says what is wrong with the id
        return {"text_id": matches[0] if len(matches) == 1 else prefix, "forgotten": count}

    # --- helpers ---------------------------------------------------------------------------

    def _moment(self, value: str | None, name: str, *, end: bool) -> datetime | None:
        """An ISO date or time in TIMEZONE; a date alone means its whole day."""
        if value is None or not value.strip():
            return None
        zone = self.app.clock.at(now_ms()).tzinfo
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


def _limit(value: int, name: str) -> int:
    if not 1 <= value <= MAX_LIMIT:
        raise BadInput(f"{name} must be between 1 and {MAX_LIMIT}, not {value}")
    return value


def _within(
    items: list[dict[str, Any]], start: datetime | None, end: datetime | None
) -> list[dict[str, Any]]:
    """The items whose time (a summary: its span) meets [start, end]; ranks renumbered."""
    kept: list[dict[str, Any]] = []
    for item in items:
        first = datetime.fromisoformat(item["time"])
        last = datetime.fromisoformat(item.get("end", item["time"]))
        if (start is None or last >= start) and (end is None or first <= end):
            kept.append({**item, "rank": len(kept) + 1})
    return kept


def _client_name(name: str) -> str:
    """The client's own name (`clientInfo.name`), printable and short; "mcp" when unnamed."""
    shown = "".join(c for c in name if c.isprintable()).strip()[:MAX_CLIENT_CHARS]
    return shown or "mcp"
