"""Trustworthy memory: what the user said survives faults, bad input and the model's mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from model_server import ModelServer, Reply
from test_memory import open_app, role_of, say, scripted, wait_indexed

from seelen.agent import Notice
from seelen.app import build_app
from seelen.config import load_settings
from seelen.errors import ModelError
from seelen.memory.persona import PERSONA, PROFILE
from seelen.memory.vetting import vet
from seelen.prompts import QUOTE_CLOSE, QUOTE_OPEN, strip_quotes
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
    sid = app.sessions.current.session_id
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
    from seelen.export import write_export

    env.responder = scripted({"summary": "Talked.", "profile": "Name: Ada", "persona": "new"})
    app = await open_app()
    raw = b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"
    app.files.path(PERSONA).write_bytes(raw)
    assert await say(app, "hello") == "ok"
    assert "binary" in (write_export(app, "json", None) or "")
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


# --- streams told truthfully -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Reply(text="ACK: fault tolerance works", cut_after=2), "stopped before finishing"),
        (Reply(text="ACK: fault tolerance works", cut_after=2, cut="drop"), "broke off"),
        (Reply(raw_body="<html>502 Bad Gateway</html>"), "no completion"),
    ],
    ids=["no-finish", "dropped", "not-json"],
)
async def test_a_broken_stream_is_kept_as_interrupted_and_retried(
    env: ModelServer, fault: Reply, words: str
) -> None:
    from seelen.agent import Done, Failed

    app = await open_app()
    env.enqueue(fault)
    events = [e async for e in app.bot.turn("Say ACK")]
    failed = [e.message for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and words in failed[0]
    assert not any(isinstance(e, Done) for e in events)
    turns = app.store.turns(app.sessions.current.session_id)
    assert [t.role for t in turns if t.role == "user"] == ["user"]
    replies = [t for t in turns if t.role == "assistant"]
    assert all(t.meta.get("interrupted") and t.text for t in replies)  # never a "complete" cut
    assert app.bot.unanswered().text == "Say ACK"
    env.enqueue("ACK: fault tolerance works")
    events = [e async for e in app.bot.retry()]
    assert [e.text for e in events if isinstance(e, Done)] == ["ACK: fault tolerance works"]
    # The retried prompt ends with the question, not with the cut-off reply.
    assert env.last_messages()[-1] == {"role": "user", "content": "Say ACK"}
    assert app.bot.unanswered() is None
    await app.aclose()


# --- prompt clipping ----------------------------------------------------------------------------


async def test_a_pasted_megabyte_is_stored_whole_but_clipped_in_the_prompt(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seelen.memory.context import estimate_tokens

    monkeypatch.setenv("CONTEXT_TOKENS", "4000")
    app = await open_app()
    pasted = "START " + "lorem ipsum dolor " * 55_000 + " so what do you think? END"  # ~1 MB
    assert await say(app, pasted) == "ok"
    stored = [t.text for t in app.store.turns(app.sessions.current.session_id)]
    assert stored[0] == pasted
    messages = env.last_messages()
    total = sum(estimate_tokens(json.dumps(m)) for m in messages)
    assert total <= 4000 * 1.1, total
    sent = messages[-1]["content"]
    assert sent.startswith("START ") and sent.endswith("what do you think? END")
    assert "characters left out of this prompt" in sent
    await app.aclose()


# --- privacy ------------------------------------------------------------------------------------


async def test_profile_files_are_private_whatever_the_umask(
    env: ModelServer, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import stat

    monkeypatch.setenv("DEBUG_MODE", "true")  # writes logs/prompts.jsonl
    from seelen.store import Store

    profile = data_dir / "default"
    profile.mkdir(parents=True)
    Store(profile / "chat_sessions.db").close()
    os.chmod(profile / "chat_sessions.db", 0o644)  # left open by an earlier version
    os.chmod(profile, 0o755)
    old = os.umask(0o022)
    try:
        env.responder = scripted({"summary": "Tea.", "profile": "Likes tea", "persona": "Me."})
        app = await open_app()
        await say(app, "I like tea")
        await app.sessions.archive()  # history/ versions of persona and profile
        await say(app, "more tea")
        await wait_indexed(app)  # lancedb/ files
        paths = [profile, *profile.rglob("*")]
        assert any(p.name.endswith("-wal") for p in paths)
        assert (profile / "logs" / "prompts.jsonl").is_file() and (profile / "history").is_dir()
        await app.aclose()
    finally:
        os.umask(old)
    open_to_others = [
        f"{p.relative_to(data_dir)} {stat.S_IMODE(p.stat().st_mode):o}"
        for p in paths
        if p.exists() and not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert open_to_others == []


async def test_an_error_that_echoes_the_api_key_is_redacted(
    env: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seelen.agent import Failed

    key = "custom-key-4f9a7c21"  # not shaped like sk-…, so only knowing the key can hide it
    monkeypatch.setenv("OPENAI_API_KEY", key)
    app = await open_app()
    env.enqueue(Reply(status=401, text=f"Incorrect API key provided: {key}"))
    events = [e async for e in app.bot.turn("hello")]
    failed = [e.message for e in events if isinstance(e, Failed)]
    assert failed and "401" in failed[0] and "[redacted]" in failed[0]
    assert key not in failed[0]
    await app.aclose()


# --- clear one-line errors -------------------------------------------------------------------


def test_a_full_disk_and_a_read_only_database_are_clear_store_errors(data_dir: Path) -> None:
    from seelen.errors import StoreError
    from seelen.store import Store

    data_dir.mkdir(parents=True)
    store = Store(data_dir / "chat_sessions.db")
    sid = store.create_session().session_id
    store.add_turn(sid, "user", "kept before the disk filled up")
    # SQLite's own page limit gives the very error a full disk gives (SQLITE_FULL).
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError, match="the disk is full: nothing was saved"):
        store.add_turn(sid, "user", "x" * 100_000)
    store._db.execute("PRAGMA max_page_count = 1000000")
    store._db.execute("PRAGMA query_only = ON")  # SQLITE_READONLY, as for a read-only file
    with pytest.raises(StoreError, match="is read-only"):
        store.add_turn(sid, "user", "hello")
    store._db.execute("PRAGMA query_only = OFF")
    assert [t.text for t in store.turns(sid)] == ["kept before the disk filled up"]
    store.add_turn(sid, "user", "the store works again")  # no transaction was left open
    store.close()


def test_an_empty_database_file_is_refused_not_taken_for_a_new_memory(data_dir: Path) -> None:
    from seelen.errors import StoreError
    from seelen.store import Store

    data_dir.mkdir(parents=True)
    path = data_dir / "chat_sessions.db"
    path.write_bytes(b"")
    with pytest.raises(StoreError, match=r"empty \(0 bytes\)"):
        Store(path)
    assert path.stat().st_size == 0  # left exactly as found
    path.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(StoreError, match="not a Seelen memory"):
        Store(path)


def test_invalid_utf8_in_dotenv_is_a_config_error(tmp_path: Path) -> None:
    from seelen.config import load_settings
    from seelen.errors import ConfigError

    dotenv = tmp_path / ".env"
    dotenv.write_bytes(b"CHAT_MODEL=caf\xe9\n")
    with pytest.raises(ConfigError, match=r"\.env: not UTF-8 text \(byte 15\)"):
        load_settings(environ={}, dotenv_path=dotenv)


def test_invalid_utf8_in_an_argument_is_one_clear_line(data_dir: Path) -> None:
    import os
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "seelen", "ask", os.fsdecode(b"caf\xe9")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "seelen: argument 2 is not valid UTF-8 text; check the terminal's encoding, "
        "or pipe the text on standard input"
    ]


async def test_deeply_nested_tool_arguments_never_break_a_turn(env: ModelServer) -> None:
    from seelen.agent import Done, ToolFinished, ToolStarted, outcome_preview

    nested = "[" * 100_000 + "]" * 100_000
    assert outcome_preview(nested).startswith("[[[")
    app = await open_app()
    env.enqueue(Reply(tool_calls=[{"name": "current_time", "arguments": nested}]), "done")
    events = [e async for e in app.bot.turn("what time is it?")]
    assert any(isinstance(e, ToolStarted) for e in events)
    finished = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert finished and not finished[0].ok and "nested too deeply" in finished[0].content
    assert [e.text for e in events if isinstance(e, Done)] == ["done"]
    await app.aclose()


# --- forgetting removes every copy -----------------------------------------------------------


async def test_reset_returns_every_id_so_no_vector_outlives_the_words(env: ModelServer) -> None:
    import io

    from rich.console import Console

    from seelen.repl import Repl

    app = await open_app()
    for text in ["my locker code is 4711", "my cat is called Miso", "I live near the harbour"]:
        await say(app, text)
    await wait_indexed(app)
    sid = app.sessions.current.session_id
    turn_ids = {t.text_id for t in app.store.turns(sid)}
    assert turn_ids <= set(app.recall.index.text_ids("turns"))
    # The lower layer names what the index must drop…
    ids = app.sessions.reset()
    assert set(ids) == turn_ids and app.store.turns(sid) == []
    app.forget(ids)
    assert not turn_ids & set(app.recall.index.text_ids("turns"))
    # …and /reset in the chat uses it.
    await say(app, "a new secret: the boat is Seestern")
    await wait_indexed(app)
    new_ids = {t.text_id for t in app.store.turns(sid)}
    assert await Repl(app, Console(file=io.StringIO())).handle("/reset")
    assert not new_ids & set(app.recall.index.text_ids("turns"))
    assert app.recall.search("Seestern boat", None).turns == []
    await app.aclose()


async def test_forgetting_a_turn_removes_its_verbatim_quote_from_summaries(
    env: ModelServer,
) -> None:
    from seelen.runtime import forget_text

    secret = "my bank PIN hint is the seagull on the pier"
    env.responder = scripted(
        {"summary": f"The user said: {secret}. They like the sea.", "profile": "x", "persona": "I."}
    )
    app = await open_app()
    await say(app, secret)
    sid = app.sessions.current.session_id
    await app.sessions.archive()
    await wait_indexed(app)
    turn = next(t for t in app.store.turns(sid) if t.role == "user")
    forget_text(app, turn.text_id)
    summary = app.store.session_summary(sid)
    assert secret not in summary.text
    assert summary.text == "The user said: [forgotten]. They like the sea."
    await wait_indexed(app)  # the summary's vector is rebuilt from the scrubbed text
    assert app.store.search_summaries_text("seagull", 5) == []
    await app.aclose()


async def test_a_full_disk_mid_chat_is_one_line_and_the_chat_goes_on(env: ModelServer) -> None:
    import io

    from rich.console import Console

    from seelen.repl import Repl

    app = await open_app()
    out = io.StringIO()
    repl = Repl(app, Console(file=out, width=200))
    db = app.store._db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    assert await repl.handle("x" * 50_000)  # the chat stays open
    assert "the disk is full" in out.getvalue() and "Traceback" not in out.getvalue()
    db.execute("PRAGMA max_page_count = 1000000")  # space again: the next line is answered
    assert await repl.handle("hello again")
    assert [t.text for t in app.store.turns(app.sessions.current.session_id)] == [
        "hello again",
        "ok",
    ]
    await app.aclose()
