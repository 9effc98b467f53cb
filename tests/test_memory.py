"""Layered memory through the real app: fold, archive, resume, recall across sessions."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import context_of, wait_until_async
from model_server import ModelServer, Reply
from rich.console import Console

from seelen.app import App, build_app
from seelen.chat.listings import render_why
from seelen.config import load_settings
from seelen.errors import ModelError
from seelen.memory.persona import PERSONA, PROFILE
from seelen.memory.prompts import QUOTE_CLOSE, QUOTE_OPEN
from seelen.protocol.events import Done
from seelen.store import ARCHIVED


def role_of(body: dict) -> str:
    """Which job a request is for, read from its system prompt."""
    system = body["messages"][0]["content"] if body["messages"] else ""
    if "running summary" in system:
        return "fold"
    if "finished conversation" in system:
        return "summary"
    if "profile of the user" in system:
        return "profile"
    if "self-image" in system:
        return "persona"
    return "chat"


def scripted(answers: dict[str, str | Callable[[dict], str]]) -> Callable[[dict], Reply]:
    """A responder answering each job with its own words (chat echoes by default)."""

    def respond(body: dict) -> Reply:
        answer = answers.get(role_of(body), "ok")
        return Reply(text=answer(body) if callable(answer) else answer)

    return respond


async def open_app() -> App:
    app = build_app(load_settings())
    await app.open_session()
    app.start_background()
    return app


async def say(app: App, text: str) -> str:
    events = [e async for e in app.bot.turn(text)]
    done = [e for e in events if isinstance(e, Done)]
    return done[0].text if done else ""


def jobs(server: ModelServer) -> list[str]:
    return [role_of(b) for b in server.chat_requests()]


async def test_oldest_turns_fold_into_the_rolling_summary(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_CONV_NUM", "2")
    monkeypatch.setenv("REFRESH_EVERY_CONV_NUM", "1")
    env.responder = scripted({"fold": "The user is called Ada and likes tea."})
    app = await open_app()
    for text in ["I am Ada", "I like tea"]:
        await say(app, text)
    assert "fold" not in jobs(env)  # 2 exchanges: the window is full, not over
    await say(app, "Tell me a joke")  # a third exchange: the oldest one folds
    assert jobs(env).count("fold") == 1
    session = app.sessions.current
    assert session.rolling_summary == "The user is called Ada and likes tea."
    assert session.folded_count == 2  # "I am Ada" and its reply
    last_prompt = env.chat_requests()[-1]["messages"]
    assert "The user is called Ada and likes tea." in last_prompt[0]["content"]
    assert {"role": "user", "content": "I am Ada"} not in last_prompt
    # Folded turns leave the window, never the store.
    assert "I am Ada" in [t.text for t in app.store.turns(session.session_id)]
    await app.aclose()


async def test_tool_calls_do_not_bring_the_fold_closer(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAX_CONV_NUM", "2")
    monkeypatch.setenv("REFRESH_EVERY_CONV_NUM", "1")
    calls = [{"name": "current_time", "arguments": {}, "id": f"t{i}"} for i in range(3)]
    env.enqueue(Reply(tool_calls=calls), "It is late.")
    app = await open_app()
    await say(app, "What time is it?")  # 6 rows: user, call, 3 results, reply
    await say(app, "Thanks")
    assert "fold" not in jobs(env)  # 2 exchanges, however many rows
    assert len(app.sessions.live_turns()) == 8
    env.responder = scripted({"fold": "Asked the time."})
    await say(app, "And now?")
    assert jobs(env).count("fold") == 1
    assert app.sessions.current.folded_count == 6  # the whole first exchange, tool rows too
    await app.aclose()


async def test_archive_summarises_updates_profile_and_strips_quotes(
    env: ModelServer, data_dir: Path
) -> None:
    env.responder = scripted(
        {
            "summary": "Ada talked about her cat Miso.",
            "profile": "Name: Ada\nPet: a cat named Miso",
            "persona": "I am Seelen. Ada and I talk about cats.",
            "chat": f"You said before: {QUOTE_OPEN}my cat is Miso{QUOTE_CLOSE} — lovely!",
        }
    )
    app = await open_app()
    await say(app, "My cat is called Miso")
    old = app.sessions.current.session_id
    result = await app.sessions.archive()
    assert result.summary == "Ada talked about her cat Miso."
    assert app.store.session_summary(old).text == result.summary
    assert app.store.get_session(old).status == ARCHIVED
    assert app.sessions.current.session_id != old
    assert app.files.profile.strip() == "Name: Ada\nPet: a cat named Miso"
    changes = {c.name: c for c in result.changes}
    assert changes[PROFILE].changed and "+Pet: a cat named Miso" in changes[PROFILE].diff()
    assert app.files.versions(PERSONA)  # the old persona is kept in history/
    reply = next(t for t in app.store.turns(old) if t.role == "assistant")
    assert QUOTE_OPEN not in reply.text and "lovely!" in reply.text
    # Profile and persona are updated concurrently, after the summary.
    assert jobs(env)[-3] == "summary" and set(jobs(env)[-2:]) == {"profile", "persona"}
    # A looping model cannot write forever: every archive answer is capped.
    assert all(0 < r.get("max_tokens", 0) <= 800 for r in env.chat_requests()[-3:])
    await app.aclose()


async def test_with_rewrites_off_save_writes_the_summary_and_keeps_both_files(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWRITE_FILES", "false")
    env.responder = scripted({"summary": "Ada talked about Miso.", "profile": "Name: Bob"})
    app = await open_app()
    before = {PROFILE: app.files.profile, PERSONA: app.files.persona}
    await say(app, "My cat is called Miso")
    result = await app.sessions.archive()
    assert result.summary == "Ada talked about Miso."
    assert "profile" not in jobs(env) and "persona" not in jobs(env)  # never asked
    assert {PROFILE: app.files.profile, PERSONA: app.files.persona} == before
    assert all(not c.changed and "REWRITE_FILES" in (c.note or "") for c in result.changes)
    await app.aclose()


async def test_archive_resumes_after_a_failure_without_redoing_steps(env: ModelServer) -> None:
    failing = {"on": True}

    def profile(body: dict) -> str:
        return "Name: Bo" if not failing["on"] else ""

    def respond(body: dict) -> Reply:
        job = role_of(body)
        if job == "profile" and failing["on"]:
            return Reply(status=500)
        return Reply(
            text={
                "summary": "Bo planned a trip.",
                "persona": "I am Seelen.",
                "profile": "Name: Bo",
            }.get(job, "ok")
        )

    env.responder = respond
    app = await open_app()
    await say(app, "I am Bo and I plan a trip to Oslo")
    sid = app.sessions.current.session_id
    with pytest.raises(ModelError):
        await app.sessions.archive()
    assert app.store.get_session(sid).status == "active"
    assert "summary" in app.store.archive_steps(sid)
    await app.aclose()

    failing["on"] = False
    summaries_before = jobs(env).count("summary")
    app2 = await open_app()  # the next start finishes the archive
    assert app2.store.get_session(sid).status == ARCHIVED
    assert jobs(env).count("summary") == summaries_before  # not summarised twice
    assert app2.files.profile.strip() == "Name: Bo"
    assert app2.sessions.current.session_id != sid
    await app2.aclose()


async def wait_indexed(app: App, seconds: float = 10) -> None:
    assert await asyncio.to_thread(app.index.wait_idle, seconds)
    await wait_until_async(lambda: not app.store.count_unindexed(), seconds, "texts left unindexed")


async def test_a_fact_from_an_earlier_session_reaches_a_later_prompt(env: ModelServer) -> None:
    env.responder = scripted(
        {
            "summary": "The user said their sister Lena moved to Porto in Portugal.",
            "profile": "Sister: Lena (Porto)",
            "persona": "I am Seelen.",
        }
    )
    app = await open_app()
    await say(app, "My sister Lena moved to Porto last spring")
    await say(app, "Let's talk about something else: the weather is grey")
    await app.sessions.archive()
    for text in ["I baked bread today", "The dough was sticky"]:
        await say(app, text)
    await app.sessions.archive()
    await wait_indexed(app)

    await say(app, "Which city does my sister live in now?")
    system = context_of(env.chat_requests()[-1])  # recalled for this question
    assert "Related past sessions" in system and "Porto" in system
    assert "My sister Lena moved to Porto last spring" in system
    # Shown under its session's date, with its time.
    lines = system.splitlines()
    at = next(i for i, line in enumerate(lines) if "moved to Porto last" in line)
    said = "user: My sister Lena moved to Porto last spring"
    assert re.fullmatch(r"- \[\d\d:\d\d\] " + said, lines[at])
    heading = next(line for line in reversed(lines[:at]) if not line.startswith("- "))
    assert re.fullmatch(r"### 20\d\d-\d\d-\d\d, [A-Z][a-z]+day", heading)
    result = app.bot.last_recall
    assert result is not None and result.turns[0].text.startswith("My sister Lena")
    assert {"bm25", "vector"} & set(result.turns[0].sources)
    # /why shows the same passages: the session's date, then the turn and who found it.
    console = Console(record=True, width=200)
    render_why(console, app, result)
    why = console.export_text()
    assert heading.removeprefix("### ") in why and "tokens of past turns" in why
    assert re.search(r"\d\d:\d\d user: My sister Lena moved to Porto.*score 0\.\d+ from", why)
    await app.aclose()


async def test_the_current_session_is_never_recalled(env: ModelServer) -> None:
    app = await open_app()
    await say(app, "The secret word is pineapple")
    await wait_indexed(app)
    await say(app, "what is the secret word? pineapple?")
    result = app.bot.last_recall
    assert result is not None and result.turns == [] and result.summaries == []
    console = Console(record=True, width=200)
    render_why(console, app, result)  # /why says why the word just said is not listed
    assert "this chat's own turns are in the prompt already" in console.export_text()
    await app.aclose()


async def test_a_crash_between_sqlite_and_lancedb_is_repaired_on_start(env: ModelServer) -> None:
    app = await open_app()
    app.index.stop()  # as if the process died before indexing
    turn = app.sessions.add_turn("user", "The boat is called Seestern")
    await app.aclose()
    app2 = await open_app()
    await wait_indexed(app2)
    ids = app2.recall.index.text_ids("turns")
    assert turn.text_id in ids
    await app2.aclose()


async def test_forget_removes_text_from_sqlite_and_lancedb(env: ModelServer) -> None:
    from seelen.runtime import forget_session, forget_text

    app = await open_app()
    await say(app, "my bank PIN hint is seagull")
    await wait_indexed(app)
    sid = app.sessions.current.session_id
    text_id = app.store.turns(sid)[0].text_id
    forget_text(app, text_id[:10])
    assert app.store.get_turns([text_id]) == {}
    assert text_id not in app.recall.index.text_ids("turns")
    assert app.store.search_turns_text("seagull", 5) == []
    forget_session(app, sid)
    assert app.store.get_session(sid) is None
    assert app.recall.index.count("turns") == 0
    await app.aclose()


async def test_changing_the_embedding_model_reindexes_everything(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = await open_app()
    await say(app, "first words under the local model")
    await wait_indexed(app)
    local_id = app.recall.embedder.model_id
    await app.aclose()

    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("EMBEDDING_MODEL", "test-embed")
    app2 = build_app(load_settings())
    await app2.open_session()
    assert app2.index.needs_reindex()
    app2.start_background()
    await wait_indexed(app2)
    assert app2.recall.embedder.model_id != local_id
    assert not app2.index.needs_reindex()
    assert app2.recall.index.count("turns") == 2  # both turns, under the new model only
    assert any("input" in r for r in env.requests)  # embeddings came from the endpoint
    await app2.aclose()


async def test_a_looping_model_answer_never_replaces_the_profile(env: ModelServer) -> None:
    env.responder = scripted(
        {
            "summary": "Talked about tea.",
            "profile": "\n".join(["I am warm and I like tea."] * 8),
            "persona": "I am Seelen, fond of tea talk.",
        }
    )
    app = await open_app()
    app.files.write(PROFILE, "Name: Ada")
    await say(app, "I like green tea")
    result = await app.sessions.archive()
    assert app.files.profile.strip() == "Name: Ada"
    assert not {c.name: c for c in result.changes}[PROFILE].changed
    assert app.files.persona.strip() == "I am Seelen, fond of tea talk."
    await app.aclose()
