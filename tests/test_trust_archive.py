"""Trustworthy memory at archive: quotes, checked tool-model answers, bounded inputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from model_server import ModelServer, Reply
from test_memory import open_app, role_of, say, scripted

from seelen.app import build_app
from seelen.config import load_settings
from seelen.errors import ModelError
from seelen.memory.persona import PERSONA, PROFILE
from seelen.memory.prompts import QUOTE_CLOSE, QUOTE_OPEN, strip_quotes
from seelen.memory.vetting import vet
from seelen.protocol.events import Notice
from seelen.store import ARCHIVED


def test_strip_quotes_removes_only_the_tags() -> None:
    text = f"You said {QUOTE_OPEN}I love ramen{QUOTE_CLOSE} — still true?"
    assert strip_quotes(text) == "You said I love ramen — still true?"
    assert strip_quotes("no tags here\n  kept as is ") == "no tags here\n  kept as is "


async def test_archive_keeps_quoted_words_and_never_touches_user_turns(
    env: ModelServer, data_dir: Path
) -> None:
    user_text = f"Remember: {QUOTE_OPEN}I love ramen{QUOTE_CLOSE}"
    env.responder = scripted(
        {
            "summary": "The user loves ramen.",
            "profile": "Likes ramen",
            "persona": "I am Seelen.",
            "chat": f"You told me {QUOTE_OPEN}I love ramen{QUOTE_CLOSE}, noted.",
        }
    )
    app = await open_app()
    await say(app, user_text)
    sid = app.sessions.current.session_id
    await app.sessions.archive()
    turns = {t.role: t.text for t in app.store.turns(sid)}
    assert turns["user"] == user_text  # the user's words, byte for byte
    assert turns["assistant"] == "You told me I love ramen, noted."
    await app.aclose()


# --- what the tool model writes is checked ---------------------------------------------------

LOOP = "The user likes tea. " * 30


def test_vet_refuses_empty_and_looping_answers_and_drops_reasoning() -> None:
    assert vet("  ")[1] == "empty"
    assert vet(LOOP)[1] == "repeats itself"
    assert vet("\n".join(["I am warm and I like tea."] * 8))[1] == "repeats itself"
    assert vet("<think>the user wants a summary</think>\nAda likes tea.") == (
        "Ada likes tea.",
        None,
    )
    assert vet("<think>still thinking when the tokens ran out")[1] == "empty"
    persona = (Path(__file__).parents[1] / "data" / "persona_memory.txt").read_text()
    assert vet(persona) == (persona.strip(), None)


async def test_a_looping_session_summary_is_refused_and_the_archive_retried(
    env: ModelServer,
) -> None:
    env.responder = scripted({"summary": LOOP, "profile": "Likes tea", "persona": "I am Seelen."})
    app = await open_app()
    await say(app, "I like green tea")
    sid = app.sessions.current.session_id
    with pytest.raises(ModelError, match="refused"):
        await app.sessions.archive()
    assert app.store.session_summary(sid) is None
    assert app.store.get_session(sid).status == "active"
    await app.aclose()
    env.responder = scripted(
        {"summary": "The user likes green tea.", "profile": "Likes tea", "persona": "I am Seelen."}
    )
    app2 = await open_app()  # the next start finishes it with a good summary
    assert app2.store.session_summary(sid).text == "The user likes green tea."
    assert app2.store.get_session(sid).status == ARCHIVED
    await app2.aclose()


async def test_a_looping_fold_keeps_the_previous_rolling_summary(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_CONV_NUM", "2")
    monkeypatch.setenv("REFRESH_EVERY_CONV_NUM", "1")
    app = await open_app()
    sid = app.store.create_session().session_id
    app.store.set_rolling_summary(sid, "Ada likes tea.", 0, 0)
    app.sessions.open()  # the session as stored, summary included
    env.responder = scripted({"fold": LOOP})
    await say(app, "one")
    await say(app, "two")  # MAX_CONV_NUM counts exchanges: the third one folds
    events = [e async for e in app.bot.turn("three")]
    assert any(isinstance(e, Notice) and "refused" in e.message for e in events)
    assert app.sessions.current.rolling_summary == "Ada likes tea."
    assert app.sessions.current.folded_count == 0
    await app.aclose()


async def test_reasoning_never_reaches_summary_persona_or_profile(env: ModelServer) -> None:
    def respond(body: dict) -> Reply:
        job = role_of(body)
        texts = {
            "summary": "<think>Let me list the facts.</think>Ada plans a trip to Oslo.",
            "profile": "<think>\nMerge: add the trip.\n</think>\nName: Ada\nTrip: Oslo",
            "persona": "I am Seelen, who helps Ada plan.",
        }
        return Reply(text=texts.get(job, "ok"), reasoning="SECRET CHAIN OF THOUGHT")

    env.responder = respond
    app = await open_app()
    await say(app, "I plan a trip to Oslo")
    sid = app.sessions.current.session_id
    await app.sessions.archive()
    summary = app.store.session_summary(sid).text
    assert summary == "Ada plans a trip to Oslo."
    assert app.files.profile.strip() == "Name: Ada\nTrip: Oslo"
    assert app.files.persona.strip() == "I am Seelen, who helps Ada plan."
    for text in (summary, app.files.profile, app.files.persona):
        assert "think" not in text.lower() and "SECRET" not in text
    await app.aclose()


async def test_a_refused_persona_answer_keeps_the_previous_persona(env: ModelServer) -> None:
    env.responder = scripted({"summary": "Talked about tea.", "profile": "", "persona": LOOP})
    app = await open_app()
    app.files.write(PERSONA, "I am Seelen, patient and kind.")
    app.files.write(PROFILE, "Name: Ada")
    await say(app, "I like green tea")
    result = await app.sessions.archive()
    assert app.files.persona.strip() == "I am Seelen, patient and kind."
    assert app.files.profile.strip() == "Name: Ada"  # an empty answer is refused as well
    notes = {c.name: c.note for c in result.changes}
    assert "refused" in notes[PERSONA] and "refused" in notes[PROFILE]
    assert app.store.get_session(result.session_id).status == ARCHIVED
    await app.aclose()


# --- a failing step never blocks a conversation ---------------------------------------------


async def test_an_archive_that_keeps_failing_never_blocks_the_next_question(
    env: ModelServer,
) -> None:
    def respond(body: dict) -> Reply:
        job = role_of(body)
        if job == "persona":  # e.g. the endpoint refuses the persona request, every time
            return Reply(status=400, text="request too large")
        return Reply(text={"summary": "Talked about tea.", "profile": "Likes tea"}.get(job, "ok"))

    env.responder = respond
    app = await open_app()
    await say(app, "I like green tea")
    old = app.sessions.current.session_id
    with pytest.raises(ModelError, match="next start"):
        await app.sessions.archive()
    assert app.sessions.current.session_id != old  # the conversation goes on in a new session
    await app.aclose()

    for attempt in range(2):  # every later start retries, says so in one line, and answers
        notes: list[str] = []
        app = build_app(load_settings())
        await app.open_session(notes.append)
        assert any("retried at the next start" in n for n in notes), notes
        env.responder = respond
        assert await say(app, f"question {attempt}") == "ok"
        texts = [t.text for t in app.store.turns(app.sessions.current.session_id)]
        assert f"question {attempt}" in texts and "ok" in texts
        assert app.store.get_session(old).status == "active"
        await app.aclose()

    env.responder = scripted({"summary": "x", "profile": "Likes tea", "persona": "I am Seelen."})
    app = build_app(load_settings())
    await app.open_session()  # the endpoint accepts it now: the archive completes
    assert app.store.get_session(old).status == ARCHIVED
    assert app.store.session_summary(old).text == "Talked about tea."  # not summarised twice
    await app.aclose()


async def test_an_oversized_persona_is_never_sent_to_the_tool_model(env: ModelServer) -> None:
    env.responder = scripted({"summary": "Talked.", "profile": "Name: Ada", "persona": "short"})
    app = await open_app()
    huge = "I am Seelen and I remember everything. " * 10_000  # ~400 KB
    app.files.write(PERSONA, huge)
    before = app.files.persona
    await say(app, "hello")
    result = await app.sessions.archive()
    note = {c.name: c.note for c in result.changes}[PERSONA]
    assert note and "over the" in note and "characters" in note
    assert app.files.persona == before  # kept as it was
    assert app.files.profile.strip() == "Name: Ada"  # the other file is still updated
    assert not any(role_of(b) == "persona" for b in env.chat_requests())
    assert all(len(json.dumps(b)) < 100_000 for b in env.chat_requests())
    assert app.store.get_session(result.session_id).status == ARCHIVED
    await app.aclose()


async def test_a_binary_persona_breaks_no_command(env: ModelServer, data_dir: Path) -> None:
    from seelen.cli.data import write_export

    env.responder = scripted({"summary": "Talked.", "profile": "Name: Ada", "persona": "new"})
    app = await open_app()
    raw = b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"
    app.files.path(PERSONA).write_bytes(raw)
    assert await say(app, "hello") == "ok"
    out = io.StringIO()
    write_export(app, "json", None, out)
    assert "binary" in out.getvalue()
    result = await app.sessions.archive()
    assert "not plain UTF-8" in ({c.name: c.note for c in result.changes}[PERSONA] or "")
    assert app.files.path(PERSONA).read_bytes() == raw  # never rewritten behind the user's back
    await app.aclose()


async def test_a_huge_turn_is_clipped_for_the_summary_but_stored_whole(env: ModelServer) -> None:
    env.responder = scripted({"summary": "A long paste.", "profile": "x", "persona": "I am."})
    app = await open_app()
    pasted = "word " * 200_000  # 1 MB
    await say(app, pasted)
    sid = app.sessions.current.session_id
    await app.sessions.archive()
    assert [t.text for t in app.store.turns(sid) if t.role == "user"] == [pasted]
    summary_request = next(b for b in env.chat_requests() if role_of(b) == "summary")
    assert len(json.dumps(summary_request)) < 20_000
    await app.aclose()
