"""Reading an export file and telling which assistant wrote it, by its content.

A ChatGPT or Claude export is a `.zip` holding `conversations.json`, or that file itself;
llm's is an SQLite file; Seelen's own export is a JSON object. Whatever is wrong with the file
(not readable, truncated, a zip without the conversations, the wrong kind) is one error line,
raised before anything is written.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from seelen.memory.imports import chatgpt, claude, llm_logs
from seelen.memory.imports.conversation import Conversation, HistoryError

FORMATS = ("seelen", "chatgpt", "claude", "llm")
NAMES = {"seelen": "Seelen's", "chatgpt": "ChatGPT's", "claude": "Claude's", "llm": "llm's"}
ZIP_MAGIC = b"PK\x03\x04"
CONVERSATIONS = "conversations.json"


@dataclass(frozen=True)
class Export:
    """A file read and recognised: Seelen's own JSON text, or another assistant's history."""

    kind: str  # one of FORMATS, or "empty" (a list of no conversations)
    text: str = ""  # the JSON text of a Seelen export
    conversations: tuple[Conversation, ...] = ()


def read_export(source: str, fmt: str | None = None, stdin: IO[str] | None = None) -> Export:
    """Read FILE (`-`: standard input) and recognise it; `fmt` names what it must be."""
    import sys

    sqlite = source not in ("", "-") and _is_sqlite(source)
    if fmt == "llm" or (fmt is None and sqlite):
        path = Path(source) if source else llm_logs.default_path()
        if not path.is_file():
            raise HistoryError(f"no llm logs.db at {path}")
        return Export("llm", conversations=tuple(llm_logs.read(path)))
    if sqlite:
        name = NAMES.get(fmt or "", "an")
        raise HistoryError(f"this is an SQLite file, not {name} export: use --from llm")
    text = (stdin or sys.stdin).read() if source == "-" else _read_text(Path(source))
    return _recognise(text, fmt)


def _is_sqlite(source: str) -> bool:
    return _head(Path(source), len(llm_logs.SQLITE_MAGIC)) == llm_logs.SQLITE_MAGIC


def _head(path: Path, n: int) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(n)
    except OSError as exc:
        raise HistoryError(f"cannot read {path} ({exc.strerror or exc})") from None


def _read_text(path: Path) -> str:
    """The file's text, or the text of the conversations.json inside a zip."""
    if _head(path, len(ZIP_MAGIC)) == ZIP_MAGIC:
        data, where = _from_zip(path), f"{CONVERSATIONS} in {path}"
    else:
        try:
            data, where = path.read_bytes(), str(path)
        except OSError as exc:
            raise HistoryError(f"cannot read {path} ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise HistoryError(f"{where} is not UTF-8 text") from None


def _from_zip(path: Path) -> bytes:
    """The bytes of conversations.json in the zip (the shallowest, if several)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if Path(n).name == CONVERSATIONS]
            if not names:
                raise HistoryError(
                    f"{path} holds no {CONVERSATIONS}: is it ChatGPT's or Claude's data export?"
                )
            return archive.read(min(names, key=lambda n: n.count("/")))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise HistoryError(f"{path} is not a readable zip, perhaps cut short ({exc})") from None


def _recognise(text: str, fmt: str | None) -> Export:
    """What the JSON text is; a Seelen export is checked by its own reader later."""
    try:
        data: object = json.loads(text)
    except RecursionError:
        raise HistoryError("the JSON is nested too deeply to be an export") from None
    except ValueError as exc:
        raise HistoryError(f"not JSON, or cut short ({exc})") from None
    kind = _kind(data, fmt)
    if fmt is not None and kind != fmt and kind != "empty":
        raise HistoryError(f"this is {NAMES[kind]} export, not {NAMES[fmt]}: use --from {kind}")
    if kind == "seelen" or (kind == "empty" and fmt == "seelen"):
        return Export("seelen", text=text)
    if kind == "empty":
        return Export(fmt or "empty")
    reader = chatgpt.read if kind == "chatgpt" else claude.read
    return Export(kind, conversations=tuple(reader(data)))


def _kind(data: object, fmt: str | None) -> str:
    """The export's kind by its shape; for anything else, the kind asked for (whose reader
    then says what is wrong), Seelen's when none was."""
    if data == []:
        return "empty"
    if chatgpt.looks_like(data):
        return "chatgpt"
    if claude.looks_like(data):
        return "claude"
    if fmt is not None:
        return fmt
    if isinstance(data, list):
        raise HistoryError("a JSON list, but not ChatGPT's or Claude's conversations")
    return "seelen"
