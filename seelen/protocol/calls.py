"""What a front-end asks of an open profile, one class per call, and what the owner process
says about itself.

A call is answered by a result of `results.py` (or `events.Failed` with one sentence); `Ask`
by a turn's events (`events.py`), the last `Done` or `Failed`; `Import` by `ImportProgress`
frames, then `Imported`. `version` (the client's `code_version()`) must match the owner's:
otherwise it answers `Refused`, and the client replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from seelen.protocol.codec import Frame


@dataclass(frozen=True, kw_only=True)
class Request(Frame):
    """What a client asks."""

    KEY: ClassVar[str] = "op"
    version: str = ""


@dataclass(frozen=True, kw_only=True)
class Ask(Request):
    """A question for the model; an ephemeral one writes nothing. `fingerprint`: the
    client's settings (an owner answers only clients that would behave like it)."""

    TAG: ClassVar[str] = "ask"
    text: str
    ephemeral: bool = False
    fingerprint: str = ""


@dataclass(frozen=True, kw_only=True)
class Search(Request):
    """Recall's ranking for `query`: `limit` turns and summaries, best first."""

    TAG: ClassVar[str] = "search"
    query: str
    limit: int | None = 10  # None: as many turns as the chat's prompt holds
    since: str | None = None  # ISO 8601 date or time, inclusive
    until: str | None = None  # ISO 8601 date (the whole day) or time, inclusive
    mode: str = "hybrid"  # hybrid (the chat's), bm25 or vector


@dataclass(frozen=True, kw_only=True)
class Remember(Request):
    """Keep `text` as the user's words, attributed to `client`. `key` makes a retried
    request store it once."""

    TAG: ClassVar[str] = "remember"
    text: str
    client: str = ""
    key: str = ""


@dataclass(frozen=True, kw_only=True)
class Forget(Request):
    """Delete one turn or summary by id (or a unique prefix of it)."""

    TAG: ClassVar[str] = "forget"
    text_id: str


@dataclass(frozen=True, kw_only=True)
class ForgetSession(Request):
    """Delete a whole session by id (or a unique prefix of it): its turns, its summary and
    their vectors."""

    TAG: ClassVar[str] = "forget_session"
    session_id: str


@dataclass(frozen=True, kw_only=True)
class WriteFile(Request):
    """Replace the persona or the user profile (`name`: persona_memory.txt or
    user_profile.txt) with `text`, the previous version kept in history/; the holder's
    next turn uses it."""

    TAG: ClassVar[str] = "write_file"
    name: str
    text: str


@dataclass(frozen=True, kw_only=True)
class ListSessions(Request):
    """The newest `n` sessions with their dates and summaries."""

    TAG: ClassVar[str] = "recent_sessions"
    n: int = 5


@dataclass(frozen=True, kw_only=True)
class GetProfile(Request):
    """The user's profile and the assistant's persona, and which memory is served."""

    TAG: ClassVar[str] = "get_profile"


@dataclass(frozen=True, kw_only=True)
class SearchNotes(Request):
    """Passages of the profile's knowledge folders for `query`."""

    TAG: ClassVar[str] = "search_knowledge"
    query: str
    limit: int = 5


@dataclass(frozen=True, kw_only=True)
class Import(Request):
    """Add the export at `path` (an absolute path the owner can read) to memory; `fmt`
    names its format (None: recognised by its content)."""

    TAG: ClassVar[str] = "import"
    path: str
    fmt: str | None = None


@dataclass(frozen=True, kw_only=True)
class GetIndexState(Request):
    """How many texts still wait for their vectors."""

    TAG: ClassVar[str] = "index_state"


@dataclass(frozen=True, kw_only=True)
class Status(Request):
    """What the owner process is and does (`seelen server status`)."""

    TAG: ClassVar[str] = "status"


@dataclass(frozen=True, kw_only=True)
class Stop(Request):
    """Finish what was accepted, then exit (a chat refuses)."""

    TAG: ClassVar[str] = "stop"


@dataclass(frozen=True, kw_only=True)
class Refused(Frame):
    """This owner will not serve the request: another `version`, other `settings`, "memory
    calls only", or "an open chat owns it" (to `Stop`)."""

    TAG: ClassVar[str] = "refused"
    FINAL: ClassVar[bool] = True
    reason: str


@dataclass(frozen=True, kw_only=True)
class OwnerStatus(Frame):
    """The answer to `Status`."""

    TAG: ClassVar[str] = "status"
    FINAL: ClassVar[bool] = True
    pid: int
    kind: str  # "background" (clients may stop it) or "chat"
    version: str
    fingerprint: str
    started: float
    answered: int
    busy: bool
    clients: int = 0  # connections being answered or waiting for their turn
    memory_only: bool = False  # started for memory calls only: answers no `Ask`
    resting: bool = False  # nothing loaded: the profile opens at the next request


@dataclass(frozen=True, kw_only=True)
class Stopping(Frame):
    """The answer to `Stop`: the owner finishes what it accepted, then exits."""

    TAG: ClassVar[str] = "stopping"
    FINAL: ClassVar[bool] = True


# The memory calls: each answered by one result (or Failed), beside a running turn.
MemoryCall = (
    Search
    | Remember
    | Forget
    | ForgetSession
    | WriteFile
    | ListSessions
    | GetProfile
    | SearchNotes
    | GetIndexState
)
MEMORY_CALLS: tuple[type[Request], ...] = (
    Search,
    Remember,
    Forget,
    ForgetSession,
    WriteFile,
    ListSessions,
    GetProfile,
    SearchNotes,
    GetIndexState,
)
REQUESTS: tuple[type[Request], ...] = (Ask, Import, Status, Stop, *MEMORY_CALLS)
