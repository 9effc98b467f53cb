"""What the memory calls of an open profile answer, as classes: the same objects whether the
call ran in this process (`memory search --json`, the Python API) or in the profile's owner
(`seelen mcp`), and the source of `seelen mcp`'s output schemas. Times are ISO 8601 with
milliseconds in the user's TIMEZONE."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from seelen.protocol.codec import Frame, doc


@dataclass(frozen=True, kw_only=True)
class MemoryItem:
    """One recalled turn or session summary. `rank` and `score` are null for a turn in the
    prompt only as the context of a recalled one (`context_for` names that one)."""

    rank: int | None = doc("its place in the ranking, 1 = best")
    text_id: str = doc("the text's id: give it to forget")
    session_id: str
    kind: str = doc("turn or summary")
    time: str = doc("when it was said (a summary: when its session began)")
    end: str | None = doc("a summary: when its session ended", default=None)
    role: str | None = doc("a turn: user or assistant", default=None)
    text: str
    score: float | None = doc("the fused score it was ranked by; higher is better")
    rankers: dict[str, int] = doc("which rankers found it, at which rank")
    in_prompt: bool = doc("whether Seelen's own chat shows it to its model")
    passage: int | None = doc("its session's block in the chat's prompt, 1 = first", default=None)
    context_for: str | None = doc("the recalled turn it makes understandable", default=None)


@dataclass(frozen=True, kw_only=True)
class SearchResult(Frame):
    """Recall's ranking for one query, as Seelen's chat ranks it: the best first."""

    TAG: ClassVar[str] = "search_result"
    FINAL: ClassVar[bool] = True
    query: str
    mode: str = "hybrid"
    ms: float = 0.0
    prompt_tokens: int = doc("what the turns in the chat's prompt cost", default=0)
    since: str | None = None
    until: str | None = None
    summaries: list[MemoryItem] = field(default_factory=list)
    turns: list[MemoryItem] = field(default_factory=list)

    def best_first(self) -> list[MemoryItem]:
        """The ranked turns and summaries in one list, the best match first (by fused score;
        in a tie the turn, then the earlier rank); context-only turns are left out."""
        ranked = [i for i in [*self.turns, *self.summaries] if i.score is not None]
        return sorted(ranked, key=lambda i: -(i.score or 0.0))

    def top(self, limit: int) -> SearchResult:
        """This result cut to its `limit` best items, turns and summaries together: what a
        client that asked for `limit` results gets."""
        chosen = {id(i) for i in self.best_first()[:limit]}
        return replace(
            self,
            summaries=[i for i in self.summaries if id(i) in chosen],
            turns=[i for i in self.turns if id(i) in chosen],
        )


@dataclass(frozen=True, kw_only=True)
class Remembered(Frame):
    """A text kept in memory as the user's words."""

    TAG: ClassVar[str] = "remembered"
    FINAL: ClassVar[bool] = True
    text_id: str
    session_id: str
    time: str
    role: str
    text: str
    client: str


@dataclass(frozen=True, kw_only=True)
class Forgotten(Frame):
    """What `forget` removed."""

    TAG: ClassVar[str] = "forgotten"
    FINAL: ClassVar[bool] = True
    text_id: str
    forgotten: int = doc("how many texts went (a turn, or a summary)")


@dataclass(frozen=True, kw_only=True)
class FileWritten(Frame):
    """What `WriteFile` did: whether the text changed, and whether an earlier version
    was kept in history/ (an empty file leaves none)."""

    TAG: ClassVar[str] = "file_written"
    FINAL: ClassVar[bool] = True
    name: str
    changed: bool
    kept: bool = False


@dataclass(frozen=True, kw_only=True)
class SessionInfo:
    """One session: its dates and summary."""

    session_id: str
    status: str = doc(
        "active (being talked in), archived, or archive pending (its archive failed; the next "
        "start finishes it)"
    )
    start: str
    end: str | None
    turns: int
    summary: str
    summary_id: str | None


@dataclass(frozen=True, kw_only=True)
class SessionList(Frame):
    """The newest sessions, newest first."""

    TAG: ClassVar[str] = "sessions"
    FINAL: ClassVar[bool] = True
    sessions: list[SessionInfo] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ProfileInfo(Frame):
    """What Seelen knows about the user, its own persona, and which memory this is."""

    TAG: ClassVar[str] = "profile"
    FINAL: ClassVar[bool] = True
    profile: str = doc("what Seelen knows about the user (user_profile.txt)")
    persona: str = doc("Seelen's picture of itself (persona_memory.txt)")
    name: str = doc("the profile served (SEELEN_PROFILE)", default="default")
    data_dir: str = doc("the data dir it lives in (SEELEN_DATA_DIR)", default="")
    sessions: int = doc("how many sessions it holds", default=0)
    turns: int = doc("how many turns it holds", default=0)

    @property
    def empty(self) -> bool:
        """Nothing remembered yet: a new memory (or the wrong SEELEN_DATA_DIR)."""
        return not self.turns and not self.profile.strip()


@dataclass(frozen=True, kw_only=True)
class NotePassage:
    """A piece of a note from the knowledge folders. Higher `score` = better match."""

    path: str = doc("the folder's name, then the path inside it")
    heading: str
    text: str
    score: float
    file: str = doc("the note's absolute path", default="")

    def label(self) -> str:
        """ "path › heading" (or just the path), as shown to the user and the model."""
        return f"{self.path} › {self.heading}" if self.heading else self.path


@dataclass(frozen=True, kw_only=True)
class NoteResult(Frame):
    """The best passages of the knowledge folders for one query."""

    TAG: ClassVar[str] = "notes"
    FINAL: ClassVar[bool] = True
    query: str
    passages: list[NotePassage] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ImportProgress(Frame):
    """How far an import is: `done` of `total` messages written."""

    TAG: ClassVar[str] = "import_progress"
    done: int
    total: int


@dataclass(frozen=True, kw_only=True)
class Imported(Frame):
    """What an import added (what was there already is not counted), in one line, and how
    many texts wait for their vectors (keyword search finds them meanwhile)."""

    TAG: ClassVar[str] = "imported"
    FINAL: ClassVar[bool] = True
    line: str
    turns: int
    unindexed: int = 0


@dataclass(frozen=True, kw_only=True)
class IndexState(Frame):
    """How far the vector index is behind the memory (`unindexed` texts wait)."""

    TAG: ClassVar[str] = "index_state"
    FINAL: ClassVar[bool] = True
    unindexed: int
    error: str = ""  # why indexing stopped, when it did


# The results that travel alone on the socket, each the answer to one call.
RESULTS: tuple[type[Frame], ...] = (
    SearchResult,
    Remembered,
    Forgotten,
    FileWritten,
    SessionList,
    ProfileInfo,
    NoteResult,
    ImportProgress,
    Imported,
    IndexState,
)
