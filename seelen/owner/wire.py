"""The owner's wire protocol: where a profile's socket lives, who may talk to it, and how.

One request per connection, as one JSON line; the owner answers with JSON lines, the last
of which has `"end": true`. Every message is a typed class below, shared by the owner and
its thin clients; `encode` and `decode` are the only way in or out, so both ends agree on
each field. This module imports only the standard library: a client must start in a few
milliseconds.

Requests (`"op"`): `Ask`, `Status`, `Stop`, and the memory calls of `seelen mcp`
(`Search`, `Remember`, `Forget`, `RecentSessions`, `GetProfile`, `SearchKnowledge`).
Answers (`"type"`): while answering, `Saved`, `Notice`, `Delta`, `Used`, `Progress`,
`ToolRan`; at the end (`"end": true`) one of `Done`, `Failed`, `Refused`, `StatusReply`,
`Stopping`, `Result`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

if TYPE_CHECKING:
    from seelen.config import Settings

SOCKET_NAME = "owner.sock"
SPAWN_LOCK = "owner.spawn.lock"
# The profile's writer lock, written by `seelen.runtime.ProfileLock`: {"pid": …, "role": …}
# while held, emptied on release. Clients read it to say whom they wait for.
LOCK_FILE = "owner.lock"
# AF_UNIX paths are limited to 108 bytes on Linux (including the final NUL).
MAX_SOCKET_PATH = 107
# A JSON line longer than this is refused: a question, with its reply, fits many times over.
MAX_LINE = 64 * 1024 * 1024
# What an owner exits with when another process holds the profile (`python -m seelen.owner`).
EXIT_PROFILE_BUSY = 3
# Set (to "1") in the environment of an owner started for memory calls only (`seelen mcp`):
# it builds no chat model (no local llama.cpp server) and refuses `Ask`, so the first `ask`
# replaces it with a full owner.
MEMORY_ONLY_ENV = "SEELEN_OWNER_MEMORY_ONLY"

_HOLDERS = {
    "chat": "the Seelen chat in another terminal",
    "owner": "Seelen's background process",
}


# --- messages ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Message:
    """One line on the wire. `TAG` names it (`op` for requests, `type` for answers)."""

    TAG: ClassVar[str] = ""
    KEY: ClassVar[str] = "type"
    FINAL: ClassVar[bool] = False  # the last message of an answer


@dataclass(frozen=True, kw_only=True)
class Request(Message):
    """What a client asks; `version` (`code_version()`) must match the owner's."""

    KEY: ClassVar[str] = "op"
    version: str = ""


@dataclass(frozen=True, kw_only=True)
class Ask(Request):
    """A question for the model; an ephemeral one writes nothing."""

    TAG: ClassVar[str] = "ask"
    text: str
    ephemeral: bool = False
    fingerprint: str = ""


@dataclass(frozen=True, kw_only=True)
class Status(Request):
    """What the owner is and does (`seelen server status`)."""

    TAG: ClassVar[str] = "status"


@dataclass(frozen=True, kw_only=True)
class Stop(Request):
    """Finish what was accepted, then exit (a chat refuses)."""

    TAG: ClassVar[str] = "stop"


@dataclass(frozen=True, kw_only=True)
class Search(Request):
    """Recall's ranking for `query`, as `seelen memory search --json` prints it."""

    TAG: ClassVar[str] = "search"
    query: str
    limit: int = 10
    since: str | None = None  # ISO 8601 date or time, inclusive
    until: str | None = None  # ISO 8601 date (the whole day) or time, inclusive


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
class RecentSessions(Request):
    """The newest `n` sessions with their dates and summaries."""

    TAG: ClassVar[str] = "recent_sessions"
    n: int = 5


@dataclass(frozen=True, kw_only=True)
class GetProfile(Request):
    """The user's profile and the assistant's persona, as Seelen keeps them."""

    TAG: ClassVar[str] = "get_profile"


@dataclass(frozen=True, kw_only=True)
class SearchKnowledge(Request):
    """Passages of the profile's knowledge folders for `query`."""

    TAG: ClassVar[str] = "search_knowledge"
    query: str
    limit: int = 5


@dataclass(frozen=True, kw_only=True)
class Saved(Message):
    """The question is committed: from here on, losing the owner loses no words."""

    TAG: ClassVar[str] = "saved"
    text_id: str


@dataclass(frozen=True, kw_only=True)
class Notice(Message):
    """Something the user should know that is not part of the reply."""

    TAG: ClassVar[str] = "notice"
    message: str


@dataclass(frozen=True, kw_only=True)
class Delta(Message):
    """A piece of the reply, as it streams."""

    TAG: ClassVar[str] = "delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class Used(Message):
    """Which notes the answer drew on, as one line."""

    TAG: ClassVar[str] = "used"
    text: str


@dataclass(frozen=True, kw_only=True)
class Progress(Message):
    """A running tool's progress, as one line."""

    TAG: ClassVar[str] = "progress"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolRan(Message):
    """A tool call ended, well (`ok`) or not."""

    TAG: ClassVar[str] = "tool"
    name: str
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Done(Message):
    """The reply, complete and saved."""

    TAG: ClassVar[str] = "done"
    FINAL: ClassVar[bool] = True
    text: str
    session_id: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Failed(Message):
    """No answer: `message` says why; `saved` whether the question is kept for /retry."""

    TAG: ClassVar[str] = "failed"
    FINAL: ClassVar[bool] = True
    message: str
    saved: bool = False


@dataclass(frozen=True, kw_only=True)
class Refused(Message):
    """This owner will not serve the request: another `version`, other `settings`."""

    TAG: ClassVar[str] = "refused"
    FINAL: ClassVar[bool] = True
    reason: str


@dataclass(frozen=True, kw_only=True)
class StatusReply(Message):
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
    memory_only: bool = False  # started for memory calls (MEMORY_ONLY_ENV): answers no `Ask`


@dataclass(frozen=True, kw_only=True)
class Stopping(Message):
    """The answer to `Stop`: the owner finishes what it accepted, then exits."""

    TAG: ClassVar[str] = "stopping"
    FINAL: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class Result(Message):
    """The answer to a memory call: JSON data whose shape the call documents."""

    TAG: ClassVar[str] = "result"
    FINAL: ClassVar[bool] = True
    data: dict[str, Any]


Final = Done | Failed | Refused | StatusReply | Stopping | Result
Answer = Saved | Notice | Delta | Used | Progress | ToolRan | Final
MemoryCall = Search | Remember | Forget | RecentSessions | GetProfile | SearchKnowledge

AnyRequest = Ask | Status | Stop | MemoryCall

_REQUESTS: dict[str, type[Message]] = {c.TAG: c for c in typing.get_args(AnyRequest)}
_ANSWERS: dict[str, type[Message]] = {c.TAG: c for c in typing.get_args(Answer)}
M = TypeVar("M", bound=Message)


def encode(message: Message) -> bytes:
    """One message as one JSON line."""
    data: dict[str, Any] = {message.KEY: message.TAG}
    data.update((f.name, getattr(message, f.name)) for f in fields(message))
    if message.FINAL:
        data["end"] = True
    return json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"


def decode_request(line: bytes) -> Request:
    """A client's line as its request; ValueError when it is not one."""
    message = _decode(line, "op", _REQUESTS)
    assert isinstance(message, Request)
    return message


def decode_answer(line: bytes) -> Answer:
    """An owner's line as its answer; ValueError when it is not one."""
    return typing.cast(Answer, _decode(line, "type", _ANSWERS))


def _decode(line: bytes, key: str, known: dict[str, type[Message]]) -> Message:
    data = json.loads(line.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("a message must be a JSON object")
    cls = known.get(data.get(key))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown message {key} {data.get(key)!r}")
    return _build(cls, data)


def _build(cls: type[M], data: dict[str, Any]) -> M:
    """`cls` from JSON data: every field of the right type, absent ones defaulted."""
    hints = _HINTS.get(cls) or _HINTS.setdefault(cls, typing.get_type_hints(cls))
    values = {}
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"{cls.TAG}: {f.name} is missing")
            continue
        if not _fits(data[f.name], hints[f.name]):
            raise ValueError(f"{cls.TAG}: {f.name} has the wrong type")
        values[f.name] = data[f.name]
    return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}  # each message class's annotations, read once


# `hint` is an annotation of the classes above (`str | None`, `list[dict[str, Any]]`).
# Any: a typing form has no type of its own.
def _fits(value: object, hint: Any) -> bool:
    """Whether JSON `value` matches the annotation `hint` (the shapes used above)."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):  # JSON has no bool among numbers
        return isinstance(value, (int, float) if hint is float else int) and not isinstance(
            value, bool
        )
    return isinstance(value, hint)


# --- where, and who ------------------------------------------------------------------------


def socket_path(settings: Settings) -> Path:
    """Where the owner of this profile listens."""
    return settings.profile_dir / SOCKET_NAME


def usable(path: Path) -> bool:
    """False when the path is too long for a Unix socket (then everything runs in-process)."""
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def lock_held(directory: Path) -> bool:
    """Whether a live process holds the profile's writer lock now.

    Asks the kernel (a shared `flock` that fails while a writer holds the lock), not the pid
    in the file: a holder killed by SIGTERM, a pid reused after a reboot, or a profile copied
    while its owner ran all leave a pid behind that nobody holds the lock with.
    """
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False  # no lock file: nobody has opened the profile as its writer yet
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock at once
    return False


def still_held(info: dict[str, Any], seconds: float) -> str:
    """What a command says when the profile stayed held for as long as it waits."""
    return (
        f"{describe_holder(info)} is still using this profile after {seconds:g} s "
        "(SEELEN_WAIT_SECONDS): try again when it is done"
    )


def lock_holder(directory: Path) -> dict[str, Any]:
    """What the holder of the profile's writer lock wrote about itself ({} when none)."""
    try:
        info = json.loads((directory / LOCK_FILE).read_text("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def describe_holder(info: dict[str, Any]) -> str:
    """The lock's holder in words: "the Seelen chat in another terminal (pid 12)"."""
    role = str(info.get("role", ""))
    who = _HOLDERS.get(role, f"another `seelen {role}`" if role else "another Seelen")
    return f"{who} (pid {info['pid']})" if "pid" in info else who


def code_version() -> str:
    """Seelen's version plus a digest of its installed source files.

    An upgrade (or an edited checkout) changes it, so a warm owner never answers with old code.
    Stat-ing ~60 files costs well under a millisecond.
    """
    import seelen

    root = Path(__file__).resolve().parent.parent  # this package's own files, wherever run from
    digest = hashlib.sha256(seelen.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"{seelen.__version__}+{digest.hexdigest()[:12]}"


def fingerprint(settings: Settings) -> str:
    """A digest of every setting: an owner answers questions only for clients that would
    behave like it."""
    values = {f.name: str(getattr(settings, f.name)) for f in fields(settings)}
    # The MCP list is a file relative to the working folder: name the file, and its version.
    mcp = Path(settings.mcp_servers_file).absolute()
    values["mcp_file"] = f"{mcp}:{mcp.stat().st_mtime_ns if mcp.is_file() else 0}"
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]
