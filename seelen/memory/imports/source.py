"""Reading an export file and telling which assistant wrote it, by its content.

A ChatGPT or Claude export is a `.zip` holding `conversations.json`, or that file itself;
llm's is an SQLite file; Seelen's own export is a JSON object. Whatever is wrong with the file
(not readable, truncated, a zip without the conversations, the wrong kind) is one error line,
raised before anything is written. A list of conversations is never held whole: it is read
once to check every conversation and count them, then again, one at a time, to write them.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from seelen.memory.imports import chatgpt, claude, llm_logs
from seelen.memory.imports.conversation import Conversation, HistoryError
from seelen.memory.imports.stream import StreamError, first_char, json_items

FORMATS = ("seelen", "chatgpt", "claude", "llm")
NAMES = {"seelen": "Seelen's", "chatgpt": "ChatGPT's", "claude": "Claude's", "llm": "llm's"}
ZIP_MAGIC = b"PK\x03\x04"
CONVERSATIONS = "conversations.json"


Opener = Callable[[], AbstractContextManager[IO[bytes]]]
READERS: dict[str, Callable[[object, int], Conversation]] = {
    "chatgpt": chatgpt.conversation,
    "claude": claude.conversation,
}


@dataclass(frozen=True)
class Conversations:
    """An export's conversations, each iteration reading them anew, one at a time, from
    the file (or from a list already in memory: llm's logs, a wrapped Claude export)."""

    count: int = 0
    messages: int = 0  # in all conversations, as read
    held: Sequence[Conversation] = ()
    kind: str = ""
    opener: Opener | None = field(default=None, repr=False)

    @classmethod
    def of(cls, conversations: Sequence[Conversation]) -> Conversations:
        """Conversations already in memory."""
        total = sum(len(c.messages) for c in conversations)
        return cls(len(conversations), total, conversations)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Conversation]:
        if self.opener is None:
            yield from self.held
            return
        with self.opener() as stream:
            yield from _read_items(stream, READERS[self.kind])


@dataclass(frozen=True)
class Export:
    """A file read and recognised: Seelen's own JSON text, or another assistant's history."""

    kind: str  # one of FORMATS, or "empty" (a list of no conversations)
    text: str = ""  # the JSON text of a Seelen export
    conversations: Conversations = Conversations()


def read_export(source: str, fmt: str | None = None, stdin: IO[str] | None = None) -> Export:
    """Read FILE (`-`: standard input) and recognise it; `fmt` names what it must be."""
    import sys

    sqlite = source not in ("", "-") and _is_sqlite(source)
    if fmt == "llm" or (fmt is None and sqlite):
        path = Path(source) if source else llm_logs.default_path()
        if not path.is_file():
            raise HistoryError(f"no llm logs.db at {path}")
        return Export("llm", conversations=Conversations.of(llm_logs.read(path)))
    if sqlite:
        name = NAMES.get(fmt or "", "an")
        raise HistoryError(f"this is an SQLite file, not {name} export: use --from llm")
    if source == "-":  # read once: a pipe cannot be read twice
        data = (stdin or sys.stdin).read().encode("utf-8", "surrogateescape")
        return _recognise_stream(lambda: _nullcontext(io.BytesIO(data)), "standard input", fmt)
    path = Path(source)
    if _head(path, len(ZIP_MAGIC)) == ZIP_MAGIC:
        member = _zip_member(path)
        where = f"{CONVERSATIONS} in {path}"
        return _recognise_stream(lambda: _zip_open(path, member), where, fmt)
    return _recognise_stream(lambda: _file_open(path), str(path), fmt)


def _recognise_stream(opener: Opener, where: str, fmt: str | None) -> Export:
    """A list of ChatGPT's or Claude's conversations is streamed; anything else (Seelen's
    own export, a wrapped list, the wrong thing) is read whole and recognised as before."""
    try:
        with opener() as stream:
            starts_a_list = first_char(stream) == "["
    except StreamError:  # not UTF-8
        raise HistoryError(f"{where} is not UTF-8 text") from None
    if starts_a_list:
        with opener() as stream:
            first = next(_items(stream, where), None)
        kind = _kind([first], fmt) if first is not None else "empty"
        if kind in READERS:
            if fmt is not None and kind != fmt:
                raise HistoryError(
                    f"this is {NAMES[kind]} export, not {NAMES[fmt]}: use --from {kind}"
                )
            return Export(kind, conversations=_checked(opener, kind, where))
    with opener() as stream:
        data = stream.read()
    try:
        return _recognise(data.decode("utf-8-sig"), fmt)  # a BOM, as the stream reads it
    except UnicodeDecodeError:
        raise HistoryError(f"{where} is not UTF-8 text") from None


def _checked(opener: Opener, kind: str, where: str) -> Conversations:
    """Read every conversation once (an error is raised before anything is written), count
    them, and keep only the way to read them again."""
    count = messages = 0
    with opener() as stream:
        for conversation in _read_items(stream, READERS[kind], where):
            count += 1
            messages += len(conversation.messages)
    return Conversations(count, messages, kind=kind, opener=opener)


def _read_items(
    stream: IO[bytes], reader: Callable[[object, int], Conversation], where: str = "the export"
) -> Iterator[Conversation]:
    for n, item in enumerate(_items(stream, where), start=1):
        yield reader(item, n)


def _items(stream: IO[bytes], where: str) -> Iterator[object]:
    """The parsed items of the list, with its faults as one `HistoryError` line."""
    try:
        yield from json_items(stream)
    except RecursionError:
        raise HistoryError("the JSON is nested too deeply to be an export") from None
    except StreamError as exc:
        if "UTF-8" in str(exc):
            raise HistoryError(f"{where} is not UTF-8 text") from None
        raise HistoryError(_not_json(exc, _first_bytes(stream))) from None


def _first_bytes(stream: IO[bytes]) -> bytes:
    """The first bytes of `stream`, to say what it is instead of JSON (b"?" if unseekable)."""
    try:
        stream.seek(0)
        return stream.read(64)
    except (OSError, ValueError):
        return b"?"


def _not_json(exc: Exception, head: bytes) -> str:
    """The line for a file that is not JSON: an empty one and `export -f markdown`'s file
    (which a user may well try to import back) are named as such."""
    if not head.strip():
        return "the file is empty: nothing to import"
    if head.lstrip().startswith(b"# Seelen memory export"):
        return (
            "this is a Markdown export, written for reading: import the JSON one "
            "(`seelen export -o memory.json`)"
        )
    return f"not JSON, or cut short ({exc})"


@contextmanager
def _nullcontext(stream: IO[bytes]) -> Iterator[IO[bytes]]:
    stream.seek(0)
    yield stream


@contextmanager
def _file_open(path: Path) -> Iterator[IO[bytes]]:
    try:
        with path.open("rb") as stream:
            yield stream
    except OSError as exc:
        raise HistoryError(f"cannot read {path} ({exc.strerror or exc})") from None


@contextmanager
def _zip_open(path: Path, member: str) -> Iterator[IO[bytes]]:
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as stream:
            yield stream
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise HistoryError(f"{path} is not a readable zip, perhaps cut short ({exc})") from None


def _is_sqlite(source: str) -> bool:
    return _head(Path(source), len(llm_logs.SQLITE_MAGIC)) == llm_logs.SQLITE_MAGIC


def _head(path: Path, n: int) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(n)
    except OSError as exc:
        raise HistoryError(f"cannot read {path} ({exc.strerror or exc})") from None


def _zip_member(path: Path) -> str:
    """The name of conversations.json in the zip (the shallowest, if several)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if Path(n).name == CONVERSATIONS]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise HistoryError(f"{path} is not a readable zip, perhaps cut short ({exc})") from None
    if not names:
        raise HistoryError(
            f"{path} holds no {CONVERSATIONS}: is it ChatGPT's or Claude's data export?"
        )
    return min(names, key=lambda n: n.count("/"))


def _recognise(text: str, fmt: str | None) -> Export:
    """What the JSON text is; a Seelen export is checked by its own reader later."""
    try:
        data: object = json.loads(text)
    except RecursionError:
        raise HistoryError("the JSON is nested too deeply to be an export") from None
    except ValueError as exc:
        raise HistoryError(_not_json(exc, text[:64].encode())) from None
    kind = _kind(data, fmt)
    if fmt is not None and kind != fmt and kind != "empty":
        raise HistoryError(f"this is {NAMES[kind]} export, not {NAMES[fmt]}: use --from {kind}")
    if kind == "seelen" or (kind == "empty" and fmt == "seelen"):
        return Export("seelen", text=text)
    if kind == "empty":  # whatever --from said: "from  (0 conversations…)" said nothing
        return Export("empty")
    reader = chatgpt.read if kind == "chatgpt" else claude.read
    return Export(kind, conversations=Conversations.of(reader(data)))


def _kind(data: object, fmt: str | None) -> str:
    """The export's kind by its shape; for anything else, the kind asked for (whose reader
    then says what is wrong), Seelen's when none was."""
    if data == [] or (isinstance(data, dict) and data.get("conversations") == []):
        return "empty"  # a list of none, or Claude's wrapped list of none
    if chatgpt.looks_like(data):
        return "chatgpt"
    if claude.looks_like(data):
        return "claude"
    if fmt is not None:
        return fmt
    if isinstance(data, list):
        raise HistoryError("a JSON list, but not ChatGPT's or Claude's conversations")
    return "seelen"
