"""The owner's wire protocol: every message survives encode/decode, bad lines are refused."""

from __future__ import annotations

import json
import typing

import pytest

from seelen.owner import wire

SAMPLES: list[wire.Message] = [
    wire.Ask(text="hi ✓", ephemeral=True, version="v", fingerprint="f"),
    wire.Status(),
    wire.Stop(),
    wire.Search(query="q", limit=3, since="2024-01-01", until=None, version="v"),
    wire.Remember(text="t", client="claude-code", key="k"),
    wire.Forget(text_id="abcd"),
    wire.RecentSessions(n=2),
    wire.GetProfile(),
    wire.SearchKnowledge(query="q", limit=2),
    wire.Saved(text_id="abc"),
    wire.Notice(message="n"),
    wire.Delta(text="d"),
    wire.Used(text="u"),
    wire.Progress(text="p"),
    wire.ToolRan(name="x", ok=False),
    wire.Done(text="r", session_id="s", usage={"prompt_tokens": 3}, tool_calls=[{"name": "x"}]),
    wire.Failed(message="m", saved=True),
    wire.Refused(reason="version"),
    wire.StatusReply(
        pid=1, kind="chat", version="v", fingerprint="f", started=1.5, answered=2, busy=True
    ),
    wire.Stopping(),
    wire.Result(data={"turns": [{"text_id": "a"}]}),
]


def test_every_message_type_has_a_sample() -> None:
    kinds = typing.get_args(wire.AnyRequest) + typing.get_args(wire.Answer)
    assert {type(m) for m in SAMPLES} == set(kinds)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_a_message_comes_back_as_it_was_sent(message: wire.Message) -> None:
    line = wire.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decode = wire.decode_request if isinstance(message, wire.Request) else wire.decode_answer
    assert decode(line) == message
    assert json.loads(line).get("end", False) is message.FINAL


@pytest.mark.parametrize(
    "line",
    [
        b"[1, 2]",
        b'{"op": "fly"}',
        b'{"op": "ask"}',  # no text
        b'{"op": "ask", "text": 5}',
        b'{"op": "ask", "text": "x", "ephemeral": "yes"}',
        b'{"op": "search", "query": "q", "limit": true}',
        b'{"op": "search", "query": "q", "limit": 1.5}',
        b"not json",
    ],
)
def test_a_line_that_is_no_request_is_refused(line: bytes) -> None:
    with pytest.raises(ValueError):
        wire.decode_request(line)


def test_an_answer_of_an_earlier_version_still_reads() -> None:
    # What an owner of another version says: the client must understand it to replace it.
    line = b'{"type": "refused", "reason": "version", "end": true}\n'
    assert wire.decode_answer(line) == wire.Refused(reason="version")
