"""The protocol on the owner's socket: every frame survives encode/decode, bad lines are
refused, and one class stands for each thing everywhere."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest

import seelen
from seelen.protocol import (
    OWNER_REPLIES,
    calls,
    codec,
    decode_answer,
    decode_request,
    events,
    results,
)
from seelen.protocol.results import RESULTS

ITEM = results.MemoryItem(
    rank=1,
    text_id="t1",
    session_id="s1",
    kind="turn",
    time="2024-03-04T10:05:00.000+00:00",
    role="user",
    text="hi ✓",
    score=0.03,
    rankers={"bm25": 1},
    in_prompt=True,
    passage=1,
)
SAMPLES: list[codec.Frame] = [
    calls.Ask(text="hi ✓", ephemeral=True, version="v", fingerprint="f"),
    calls.Status(),
    calls.Stop(),
    calls.Search(query="q", limit=3, since="2024-01-01", until=None, version="v"),
    calls.Remember(text="t", client="claude-code", key="k"),
    calls.Forget(text_id="abcd"),
    calls.ForgetSession(session_id="ef01"),
    calls.WriteFile(name="persona_memory.txt", text="I am ✓\n"),
    calls.ListSessions(n=2),
    calls.GetProfile(),
    calls.SearchNotes(query="q", limit=2),
    calls.Import(path="/tmp/export.zip", fmt="chatgpt"),
    calls.GetIndexState(),
    events.Saved(text_id="abc"),
    events.Recalled(sessions=1, messages=4, tokens=120),
    events.TextDelta(text="d"),
    events.ToolStarted(call_id="c", name="x", arguments="{}"),
    events.ToolFinished(call_id="c", name="x", ok=False, seconds=0.5, content="error: no"),
    events.ToolProgressed(tool="x", progress=3, total=10, message="reading"),
    events.TurnUsage(prompt_tokens=3, completion_tokens=2, tool_calls=1, seconds=1.5),
    events.Notice(message="n"),
    events.KnowledgeUsed(notes=["a.md › Intro"]),
    events.Done(text="r", session_id="s"),
    events.Failed(message="m", saved=True),
    calls.Refused(reason="version"),
    calls.OwnerStatus(
        pid=1, kind="chat", version="v", fingerprint="f", started=1.5, answered=2, busy=True
    ),
    calls.Stopping(),
    results.SearchResult(query="q", ms=1.5, prompt_tokens=40, turns=[ITEM]),
    results.Remembered(text_id="t", session_id="s", time="x", role="user", text="t", client="c"),
    results.Forgotten(text_id="t", forgotten=1),
    results.FileWritten(name="user_profile.txt", changed=True, kept=True),
    results.SessionList(
        sessions=[
            results.SessionInfo(
                session_id="s",
                status="archived",
                start="a",
                end=None,
                turns=3,
                summary="",
                summary_id=None,
            )
        ]
    ),
    results.ProfileInfo(profile="p", persona="q", name="default", data_dir="/d", turns=2),
    results.NoteResult(
        query="q", passages=[results.NotePassage(path="a.md", heading="", text="t", score=1.0)]
    ),
    results.ImportProgress(done=5, total=10),
    results.Imported(line="Imported 3 turns.", turns=3, unindexed=3),
    results.IndexState(unindexed=0),
]


def test_every_frame_class_has_a_sample() -> None:
    kinds = {*calls.REQUESTS, *events.EVENTS, *RESULTS, *OWNER_REPLIES}
    assert {type(m) for m in SAMPLES} == kinds


def test_tags_are_unique_among_requests_and_among_answers() -> None:
    answers = Counter(c.TAG for c in (*events.EVENTS, *RESULTS, *OWNER_REPLIES))
    assert [tag for tag, n in answers.items() if n > 1] == []
    assert len({c.TAG for c in calls.REQUESTS}) == len(calls.REQUESTS)


@pytest.mark.parametrize("frame", SAMPLES, ids=lambda m: type(m).__name__)
def test_a_frame_comes_back_as_it_was_sent(frame: codec.Frame) -> None:
    line = codec.encode(frame)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    decode = decode_request if isinstance(frame, calls.Request) else decode_answer
    assert decode(line) == frame
    assert json.loads(line).get("end", False) is frame.FINAL


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
        decode_request(line)


def test_a_nested_item_of_the_wrong_shape_is_refused() -> None:
    line = b'{"type": "search_result", "query": "q", "turns": [{"rank": "first"}], "end": true}'
    with pytest.raises(ValueError, match="turns"):
        decode_answer(line)


def test_an_answer_of_an_earlier_version_still_reads() -> None:
    # What an owner of another version says: the client must understand it to replace it.
    line = b'{"type": "refused", "reason": "version", "end": true}\n'
    assert decode_answer(line) == calls.Refused(reason="version")
    # and an earlier status, which lacks the newest fields
    old = b'{"type": "status", "pid": 7, "kind": "background", "version": "v", "fingerprint": "f",'
    old += b' "started": 1, "answered": 0, "busy": false, "end": true}'
    status = decode_answer(old)
    assert isinstance(status, calls.OwnerStatus) and status.pid == 7 and not status.memory_only


def test_no_class_name_is_defined_twice_in_seelen() -> None:
    root = Path(seelen.__file__).parent
    names: Counter[str] = Counter()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        names.update(node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef))
    assert [name for name, n in names.items() if n > 1] == []
