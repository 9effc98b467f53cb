"""Streaming a JSON list item by item: the same items as `json.loads`, whatever the chunks."""

from __future__ import annotations

import io
import json

import pytest

from seelen.memory.imports import stream
from seelen.memory.imports.stream import StreamError, json_items

ITEMS: list[object] = [
    {"id": "a", "mapping": {"n": {"text": "héllo 😀 \u00e9", "parts": [1, 2.5, None]}}},
    12345678901234567890,
    'a string with "quotes" and ] and , inside',
    [],
    {},
    -0.5e-3,
    True,
    {"long": "x" * 5000, "nested": [[[{"deep": [1, [2, [3]]]}]]]},
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_items_match_json_loads_whatever_the_chunk_size(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "CHUNK", chunk)
    for text in (json.dumps(ITEMS), json.dumps(ITEMS, indent=2), "\ufeff [ ]", "[1]"):
        data = text.encode("utf-8")
        assert list(json_items(io.BytesIO(data))) == json.loads(text.lstrip("\ufeff"))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[{"a": 1}, {"b": ', "cut short"),
        ('[{"a": 1}, 12', "cut short"),
        ('[{"a": 1} {"b": 2}]', "expected , or ]"),
        ('[{"a": 1}] trailing', "more after"),
        ('{"a": 1}', "not a JSON list"),
        ("", "not a JSON list"),
    ],
)
def test_broken_lists_are_errors(text: str, error: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "CHUNK", 4)
    with pytest.raises(StreamError, match=error):
        list(json_items(io.BytesIO(text.encode())))


def test_invalid_utf8_is_an_error() -> None:
    with pytest.raises(StreamError, match="UTF-8"):
        list(json_items(io.BytesIO(b'["caf\xe9"]')))
