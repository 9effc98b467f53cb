"""Frames: the protocol's classes as JSON lines, and back.

Every class that travels alone on the socket is a `Frame`: a frozen dataclass whose `TAG`
names it on the wire, under `"op"` for a request and `"type"` for everything answered. The
last frame of an answer carries `"end": true` (`FINAL`). Fields hold JSON values, lists,
string-keyed dicts, or dataclasses of their own (a `MemoryItem` inside a `SearchResult`);
`decode` checks each against its annotation, so both ends agree on every field.

Standard library only: a thin client must start in a few milliseconds.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar, Union

F = TypeVar("F", bound="Frame")
D = TypeVar("D")
# A JSON line longer than this is refused: a question, with its reply, fits many times over.
MAX_LINE = 64 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Frame:
    """One line on the socket. `TAG` names it; `KEY` says under which key."""

    TAG: ClassVar[str] = ""
    KEY: ClassVar[str] = "type"
    FINAL: ClassVar[bool] = False  # the last frame of an answer


# Any: what a field's default must be to fit any annotation (as `dataclasses.field`'s is).
def doc(text: str, **options: Any) -> Any:
    """A dataclass field described for the people and models that read its schema
    (`seelen mcp`'s output schemas show `text` as the field's description)."""
    return dataclasses.field(metadata={"doc": text}, **options)


# Any: JSON data, shaped like the object it came from.
def to_json(value: Any) -> Any:
    """A protocol object as JSON data: dataclasses as objects of their fields, in order."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def encode(frame: Frame) -> bytes:
    """One frame as one JSON line."""
    data: dict[str, Any] = {frame.KEY: frame.TAG, **to_json(frame)}
    if frame.FINAL:
        data["end"] = True
    return json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"


class Registry:
    """The frames one end may receive, by tag. `more` names the rest, loaded the first time
    a tag is not among `classes` (a client that only asks never imports the results)."""

    def __init__(
        self,
        key: str,
        classes: typing.Iterable[type[Frame]],
        more: typing.Callable[[], typing.Iterable[type[Frame]]] | None = None,
    ) -> None:
        self.key = key
        self.classes = {c.TAG: c for c in classes}
        self._more = more

    def decode(self, line: bytes) -> Frame:
        """The frame on `line`; ValueError when it is none of these."""
        data = json.loads(line.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("a message must be a JSON object")
        tag = data.get(self.key)
        if tag not in self.classes and self._more is not None:
            self.classes.update((c.TAG, c) for c in self._more())
            self._more = None
        cls = self.classes.get(tag)  # type: ignore[arg-type]
        if cls is None:
            raise ValueError(f"unknown message {self.key} {tag!r}")
        return build(cls, data)


def build(cls: type[D], data: dict[str, Any]) -> D:
    """`cls` (a dataclass) from JSON data: every field checked against its annotation,
    nested dataclasses built too, absent fields defaulted, unknown keys ignored (a
    newer peer's additions). ValueError names the first field that does not fit."""
    hints = _hints(cls)
    values = {}
    name = getattr(cls, "TAG", "") or cls.__name__
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"{name}: {f.name} is missing")
            continue
        try:
            values[f.name] = _convert(data[f.name], hints[f.name])
        except ValueError:
            raise ValueError(f"{name}: {f.name} has the wrong type") from None
    return cls(**values)


_HINTS: dict[type, dict[str, Any]] = {}  # each class's resolved annotations, read once


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


# `hint` is an annotation of the protocol's classes (`str | None`, `list[MemoryItem]`).
# Any: a typing form has no type of its own.
def _convert(value: object, hint: Any) -> Any:
    """`value` as `hint` wants it; ValueError when it does not fit."""
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        for arm in typing.get_args(hint):
            try:
                return _convert(value, arm)
            except ValueError:
                continue
        raise ValueError(hint)
    if hint is type(None):
        if value is None:
            return None
        raise ValueError(hint)
    if origin in (list, tuple):
        item = typing.get_args(hint)[0]
        if not isinstance(value, list):
            raise ValueError(hint)
        converted = [_convert(v, item) for v in value]
        return tuple(converted) if origin is tuple else converted
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(hint)
        item = typing.get_args(hint)[1]
        return {k: _convert(v, item) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ValueError(hint)
        return build(hint, value)  # type: ignore[arg-type]
    return _scalar(value, hint)


def _scalar(value: object, hint: type) -> object:
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is float:  # JSON has no bool among numbers; an int is a float
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value  # type: ignore[arg-type]
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    if not ok:
        raise ValueError(hint)
    return value
