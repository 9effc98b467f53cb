"""Trustworthy memory under faults: broken streams, full disks, bad input, forgetting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import asked
from model_server import ModelServer, Reply
from test_memory import open_app, say, scripted, wait_indexed

from seelen.config import load_settings

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
    from seelen.protocol.events import Done, Failed

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
    assert env.last_messages()[-1]["role"] == "user" and asked(env.last_messages()) == "Say ACK"
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
    sent = asked(messages)
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
    from seelen.protocol.events import Failed

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
    from seelen.errors import ConfigError

    dotenv = tmp_path / ".env"
    dotenv.write_bytes(b"CHAT_MODEL=caf\xe9\n")
    with pytest.raises(ConfigError, match=r"\.env: not UTF-8 text \(byte 15\)"):
        load_settings(environ={}, dotenv_path=dotenv)


def test_invalid_utf8_in_an_argument_is_one_clear_line(data_dir: Path) -> None:
    import os

    from helpers import run_cli

    result = run_cli("ask", os.fsdecode(b"caf\xe9"))  # as Python decodes such a byte in argv
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "seelen: argument 2 is not valid UTF-8 text; check the terminal's encoding, "
        "or pipe the text on standard input"
    ]


async def test_deeply_nested_tool_arguments_never_break_a_turn(env: ModelServer) -> None:
    from seelen.chat.render import outcome_preview
    from seelen.protocol.events import Done, ToolFinished, ToolStarted

    nested = "[" * 100_000 + "]" * 100_000
    assert outcome_preview(nested).startswith("[[[")
    app = await open_app()
    env.enqueue(Reply(tool_calls=[{"name": "current_time", "arguments": nested}]), "done")
    events = [e async for e in app.bot.turn("what time is it?")]
    assert any(isinstance(e, ToolStarted) for e in events)
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished and not finished[0].ok and "nested too deeply" in finished[0].content
    assert [e.text for e in events if isinstance(e, Done)] == ["done"]
    await app.aclose()


# --- forgetting removes every copy -----------------------------------------------------------


async def test_reset_returns_every_id_so_no_vector_outlives_the_words(env: ModelServer) -> None:
    import io

    from rich.console import Console

    from seelen.chat.repl import Repl

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

    from seelen.chat.repl import Repl

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


async def test_a_full_disk_in_piped_input_counts_each_line_as_it_fared(env: ModelServer) -> None:
    import io

    from rich.console import Console

    from seelen.chat.repl import Repl
    from seelen.errors import SeelenError

    big = "y" * 200_000  # a reply (and a summary) that no longer fits on the disk
    env.responder = scripted({"summary": big, "chat": lambda b: big if asked(b) == "hi" else "ok"})
    app = await open_app()
    shown, errors = io.StringIO(), io.StringIO()
    repl = Repl(app, Console(file=shown, width=200), errors=Console(file=errors, width=400))
    db = app.store._db
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    lines = io.StringIO(f"hi\n/save\n{'x' * 50_000}\nbye\n")
    with pytest.raises(SeelenError) as failed:
        await repl.run_stream(lines)
    # (before: "3 of 4 input lines failed and were not kept: lines 1-3")
    assert str(failed.value) == (
        "of 4 input lines: 1 message kept without its reply (line 1), 1 message not kept "
        "(line 3), 1 command failed (line 2); each error is above"
    )
    said = errors.getvalue().splitlines()
    assert len(said) == 3 and "your message is kept: /retry answers it" in said[0]
    users = [t.text for t in app.store.turns(app.sessions.current.session_id) if t.role == "user"]
    kept = [t.text for s in app.store.list_sessions() for t in app.store.turns(s.session_id)]
    assert "hi" in kept and "bye" in users and not any(t.startswith("xxx") for t in kept)
    await app.aclose()
