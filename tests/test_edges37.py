"""What a demanding user met in the commands around memory: labels said once, files read
without opening the whole memory, backups without SQLite's side files, failures that leave
nothing behind, listings that page, one JSON shape, one tokenizer."""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from helpers import failed_archive, open_store, run_cli
from model_server import ModelServer, Reply
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from seelen.app import build_app
from seelen.chat.repl import Repl
from seelen.config import load_settings


@contextlib.asynccontextmanager
async def chat_at(width: int) -> AsyncIterator[tuple[Repl, io.StringIO]]:
    """A started chat printing into a string at `width` columns (prompt-toolkit's pipe
    input; nothing drawn), its memory closed afterwards."""
    out = io.StringIO()
    app = build_app(load_settings())
    try:
        with create_pipe_input() as pipe:
            repl = Repl(app, Console(file=out, width=width), pt_input=pipe, pt_output=DummyOutput())
            await repl.start()
            yield repl, out
    finally:
        await app.aclose()


def stored_profile(data_dir: Path, turns: int = 2) -> None:
    """A default profile with one archived session of `turns` turns (none embedded yet)."""
    (data_dir / "default").mkdir(parents=True, exist_ok=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", f"my dog Rex, day {n}", None, 1_000 + n) for n in range(turns)])
    store.mark_archived(sid)
    store.close()


def test_db_check_names_each_kind_of_vectors_once(data_dir: Path) -> None:
    stored_profile(data_dir)
    checked = run_cli("db", "check")
    lines = [line for line in checked.stdout.splitlines() if "vectors of turns" in line]
    assert len(lines) == 1, checked.stdout
    assert "vectors of turns: 0 vectors for 2 texts" in lines[0]  # not "turns: turns: …"


def test_db_check_passes_texts_still_waiting_for_their_vectors(data_dir: Path) -> None:
    """After an import, the background process embeds: `db check` meanwhile is no failure
    (the doctor says the same), and it sends no one to `db repair`."""
    stored_profile(data_dir)
    checked = run_cli("db", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "…    vectors of turns: 0 vectors for 2 texts; 2 waiting to be indexed" in checked.stdout
    assert "FAIL" not in checked.stdout and "db repair" not in checked.stderr
    assert "work under way, not a fault" in checked.stderr


def test_the_persona_is_shown_from_its_file_alone_when_the_database_is_damaged(
    data_dir: Path,
) -> None:
    """Reading one file opens no memory: a damaged database (what `db restore` is for) does
    not hide the persona, its history or its path."""
    stored_profile(data_dir)
    profile = data_dir / "default"
    (profile / "persona_memory.txt").write_text("I am Seelen, fond of tea.\n", encoding="utf-8")
    (profile / "history").mkdir()
    (profile / "history" / "persona_memory.1000.txt").write_text("I was once terse.")
    (profile / "chat_sessions.db").write_bytes(b"not a database at all" * 100)
    shown = run_cli("persona", "show")
    assert shown.returncode == 0 and shown.stdout == "I am Seelen, fond of tea.\n", shown.stderr
    history = run_cli("persona", "history")
    assert history.returncode == 0 and "I was once terse." in history.stdout, history.stderr
    assert run_cli("persona", "path").stdout.strip() == str(profile / "persona_memory.txt")
    missing = run_cli("--profile", "defualt", "persona", "show")  # misspelt: named, not empty
    assert missing.returncode != 0 and "there is no profile 'defualt'" in missing.stderr


def side_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(("-wal", "-shm")))


def test_restores_leave_no_sqlite_side_files_and_lose_nothing(data_dir: Path) -> None:
    """A restore, then a second one, reads backups: no -wal or -shm is left in a backup
    folder, and the restored file is the live one SQLite expects (WAL), every turn there."""
    import sqlite3

    stored_profile(data_dir, turns=3)
    assert run_cli("db", "backup").returncode == 0
    old_style = run_cli("db", "backup").stdout.strip()  # an older Seelen's backups were WAL
    sqlite3.connect(Path(old_style) / "chat_sessions.db").execute("PRAGMA journal_mode=WAL").close()
    for which in ("1", "2", "1"):
        restored = run_cli("db", "restore", which)
        assert restored.returncode == 0, restored.stderr
        assert side_files(data_dir / "default" / "backups") == []
    live = sqlite3.connect(data_dir / "default" / "chat_sessions.db")
    assert live.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert live.execute("SELECT count(*) FROM conversation").fetchone()[0] == 3
    live.close()


def test_db_commands_on_a_new_machine_say_there_is_no_memory_yet(data_dir: Path) -> None:
    """Not "the database is damaged, restore a backup": there is nothing yet, and a repair
    or an optimize of nothing starts no profile."""
    for command in ("check", "backup", "optimize", "repair"):
        result = run_cli("db", command)
        assert result.returncode == 1, (command, result.stdout)
        assert "no memory at" in result.stderr and "yet: a chat, an ask or an import" in (
            result.stderr
        ), (command, result.stderr)
        assert "damaged" not in result.stdout + result.stderr
    assert not data_dir.exists()


def test_a_backup_of_a_damaged_database_is_refused_with_advice(data_dir: Path) -> None:
    """SQLite opens a file with a damaged page; its copy would have pushed a good backup
    out (SEELEN_BACKUPS of them are kept). The user is told what to do instead."""
    stored_profile(data_dir, turns=400)
    good = run_cli("db", "backup", env={"SEELEN_BACKUPS": "1"}).stdout.strip()
    db = data_dir / "default" / "chat_sessions.db"
    data = bytearray(db.read_bytes())
    data[8192:16384] = b"\xff" * 8192  # pages 3-4 (4 KiB each): the file still opens
    db.write_bytes(bytes(data))
    refused = run_cli("db", "backup", env={"SEELEN_BACKUPS": "1"})
    assert refused.returncode == 1 and refused.stdout == ""
    assert "the database is damaged (" in refused.stderr and "no backup was made" in (
        refused.stderr
    )
    assert "`seelen db restore` puts back the newest backup" in refused.stderr
    assert [p.name for p in (data_dir / "default" / "backups").iterdir()] == [Path(good).name]


def test_a_failed_import_on_a_new_machine_leaves_nothing_behind(
    data_dir: Path, tmp_path: Path
) -> None:
    """With the background process on (the default), a file that is not an export, given
    by path or on standard input, starts no profile, no owner and no data dir."""
    bad = tmp_path / "notes.json"
    bad.write_text("not json {", encoding="utf-8")
    by_path = run_cli("import", str(bad), env={"SEELEN_OWNER": "true"})
    piped = run_cli("import", "-", stdin="not json {", env={"SEELEN_OWNER": "true"})
    for result in (by_path, piped):
        assert result.returncode == 1
        assert result.stderr.startswith("seelen: import: not JSON"), result.stderr
    assert not data_dir.exists()


def test_sessions_list_pages_past_its_limit(data_dir: Path) -> None:
    """Only the newest N were reachable: --offset shows the next page, and a line on
    stderr (stdout stays the listing) says how to get it."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    ids = []
    for n in range(5):
        session = store.create_session()
        store.add_turns(session.session_id, [("user", f"talk {n}", None, 1_000 * (n + 1))])
        store.mark_archived(session.session_id)
        ids.append(session.session_id[:12])
    store.close()
    first = run_cli("sessions", "list", "--limit", "2")
    assert [i for i in ids if i in first.stdout] == ids[-2:]  # the two newest
    assert "seelen sessions list --offset 2 --limit 2" in first.stderr
    last = run_cli("sessions", "list", "--limit", "2", "--offset", "4")
    assert [i for i in ids if i in last.stdout] == ids[:1] and last.stderr == ""
    past = run_cli("sessions", "list", "--offset", "9")
    assert past.returncode == 0 and "No session past the newest 9." in past.stdout


def test_ask_json_has_one_shape_whether_it_answered_or_failed(env: ModelServer) -> None:
    """A caller parsing `ask --json` found `saved` only in a failure's object: the two were
    built in two places and had drifted apart."""
    import json

    env.enqueue("kept", "not kept")
    answered = json.loads(run_cli("ask", "--json", "hello").stdout)
    ephemeral = json.loads(run_cli("ask", "--json", "--ephemeral", "hello").stdout)
    env.responder = lambda body: Reply(status=500)
    failed = run_cli("ask", "--json", "hello again", env={"MAX_RETRIES": "0"})
    failure = json.loads(failed.stdout)
    assert answered.keys() == failure.keys() == ephemeral.keys()
    assert answered["saved"] is True and answered["error"] is None
    assert ephemeral["saved"] is False and ephemeral["session_id"] is None
    assert failure["saved"] is True and failure["reply"] is None


def test_two_local_embedders_in_one_process_share_one_tokenizer() -> None:
    """`memory search` with texts waiting embeds them as a writer, then searches as a
    reader: each embedder loaded the tokenizer again (54 ms, 6.4 MiB), as it shares the
    ONNX session. Their vectors stay those of one embedder."""
    import numpy as np

    from seelen.models.embed import LocalEmbedder

    first, second = LocalEmbedder(), LocalEmbedder()
    texts = ["my dog Rex", "ein Hund namens Rex"]
    assert np.allclose(first.embed(texts), second.embed(texts), atol=1e-6)
    assert first._load()[1] is second._load()[1]


def test_a_misspelt_slash_command_names_the_one_meant() -> None:
    """ "/memroy cats" said only "Unknown command /memroy. Type /help for the list."."""
    from seelen.chat.slash import unknown

    assert "did you mean /memory?" in unknown("/memroy")
    assert "did you mean /help?" in unknown("/hepl")
    assert "did you mean /reset?" in unknown("/forget")  # what other chat programs call it
    assert "did you mean /incognito?" in unknown("/INCOGNITO2")
    nothing_close = unknown("/zebra")
    assert "/help lists them" in nothing_close and "did you mean" not in nothing_close
    assert all("↑ brings your line back" in unknown(n) for n in ("/memroy", "/zebra"))


def test_the_chat_toolbar_leaves_parts_out_whole_in_a_narrow_window() -> None:
    """At 40 columns the bottom line ended "… 8 turns ·", the rest cut off: now the least
    needed parts go whole (the key hint, the model, the session), profile and turns stay."""
    from seelen.chat.input import fitted

    parts = [
        (" 工作", 0),  # two columns a character
        ("session c308c21d", 3),
        ("8 turns", 2),
        ("test-model", 3),
        ("", 1),
        ("Alt-Enter: new line", 4),
        ("/help", 1),
    ]
    wide = " 工作 · session c308c21d · 8 turns · test-model · Alt-Enter: new line · /help"
    assert fitted(parts, 100) == wide
    assert fitted(parts, 60) == " 工作 · session c308c21d · 8 turns · test-model · /help"
    assert fitted(parts, 40) == " 工作 · 8 turns · /help"
    assert fitted(parts, 14) == " 工作 · /help"
    assert fitted(parts, 3) == " 工作"  # the profile, whatever the width


async def test_help_and_tools_keep_their_indent_in_a_narrow_window(env: ModelServer) -> None:
    """At 40 columns the key hint under /help and each tool of /tools went on at column 0
    after their first line, among the indented list."""
    async with chat_at(40) as (repl, out):
        await repl.handle("/help")
        await repl.handle("/tools")
    lines = out.getvalue().splitlines()
    hint = lines.index(next(line for line in lines if "Alt-Enter" in line))
    tools = lines.index(next(line for line in lines if "current_time" in line))
    for line in (*lines[hint : hint + 3], *lines[tools : tools + 3]):
        assert line.startswith("  "), out.getvalue()


async def test_save_of_a_session_without_messages_says_there_is_nothing(
    env: ModelServer,
) -> None:
    """/save first thing said "A new session begins. The last one is archived…" and then
    "The last session is archived." of a session that held nothing."""
    async with chat_at(80) as (repl, out):
        before = repl.app.sessions.current.session_id
        await repl.handle("/save")
        assert "Nothing to save yet: this session has no messages." in out.getvalue()
        assert "archived" not in out.getvalue()
        assert repl.app.sessions.current.session_id == before


async def test_ctrl_c_before_the_first_word_says_the_message_is_kept(env: ModelServer) -> None:
    """Stopped while the model thought, the chat said "(stopped)": a newcomer could not tell
    whether the message was lost. It is kept, and /retry answers it."""
    import asyncio
    import os
    import signal

    from helpers import wait_until_async

    env.enqueue(Reply(text="late words", delay=30), "answered at last")
    async with chat_at(80) as (repl, out):
        ask = asyncio.create_task(repl.handle("what is my cat called?"))
        await wait_until_async(lambda: env.chat_requests(), 20, "the model was not asked")
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C
        await asyncio.wait_for(ask, 20)
        assert "(stopped; your message is kept: /retry answers it)" in out.getvalue()
        assert [t.text for t in repl.app.sessions.live_turns()] == ["what is my cat called?"]
        await repl.handle("/retry")
        assert "answered at last" in out.getvalue()


async def test_why_keeps_each_recalled_text_indented_in_a_narrow_window(
    env: ModelServer,
) -> None:
    """At 40 columns the lines of /why that wrapped (a summary, a recalled turn with the
    rankers that found it) went on at column 0, under the dates they belong to."""
    async with chat_at(40) as (repl, out):
        await repl.handle("my cat Miso sleeps on the red sofa every afternoon")
        await repl.handle("/save")
        await repl.archiving.finish()
        await repl.handle("where does Miso sleep in the afternoon?")
        start = len(out.getvalue())
        await repl.handle("/why")
    shown = out.getvalue()[start:].splitlines()
    turns = [n for n, line in enumerate(shown) if "user:" in line]
    assert turns, shown
    block = shown[turns[0] : turns[0] + 3]  # the recalled turn and its wrapped lines
    assert all(line.startswith("  ") for line in block), shown


def test_commands_without_a_model_leave_an_unfinished_archive_quietly(data_dir: Path) -> None:
    """db optimize, db repair, memory reindex open the memory without a model, yet each
    tried to finish an archive left half done and said "archive not finished (no tool
    model is configured…)": false (it is configured), and said again at every command."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    session = store.create_session()  # a chat's /save began its archive, then the model failed
    store.add_turns(session.session_id, [("user", "my dog Rex", None, 1_000)])
    store.record_archive_step(session.session_id, "started")
    store.close()
    for command in (("db", "optimize"), ("db", "repair"), ("memory", "reindex")):
        result = run_cli(*command)
        assert result.returncode == 0, result.stderr
        assert "archive" not in result.stderr and "tool model" not in result.stderr, result.stderr
    store = open_store(data_dir)
    assert [s.session_id for s in store.pending_archives()] == [session.session_id]
    store.close()


async def test_exit_alone_at_the_prompt_leaves_instead_of_being_sent(env: ModelServer) -> None:
    """A newcomer's "exit" went to the model as a message, was answered and stored for good
    in the memory; "quit" too."""
    import asyncio

    for word in ("exit", " Quit "):
        app = build_app(load_settings())
        with create_pipe_input() as pipe:
            repl = Repl(app, Console(file=io.StringIO()), pt_input=pipe, pt_output=DummyOutput())
            await repl.start()
            pipe.send_text(f"the sky is blue\r{word}\r/exit\r")  # /exit: the old way out
            await asyncio.wait_for(repl.run_interactive(), 20)
        texts = [t.text for t in app.sessions.live_turns() if t.role == "user"]
        await app.aclose()
        assert texts[-1] == "the sky is blue", (word, texts)
    assert len(env.chat_requests()) == 2  # "the sky is blue", once each time


def test_sessions_list_shows_a_failed_archive_as_pending_not_active(data_dir: Path) -> None:
    """A /save whose model failed leaves its session stored as active, its archive begun:
    `sessions list` showed it "active" beside the new session, two active sessions."""
    old, new = failed_archive(data_dir)
    listed = run_cli("sessions", "list")
    assert listed.returncode == 0, listed.stderr
    lines = {
        line[:12]: line for line in listed.stdout.splitlines() if line[:12] in (old[:12], new[:12])
    }
    assert "archive pending, 1 turn" in lines[old[:12]], listed.stdout
    assert "active, 1 turn" in lines[new[:12]], listed.stdout
    assert max(len(line) for line in lines.values()) <= 80, listed.stdout
    store = open_store(data_dir)  # shown so, stored as it was
    assert store.get_session(old).status == "active"  # type: ignore[union-attr]
    store.close()


async def test_knowledge_without_a_query_says_what_it_does_and_how_to_add_a_folder(
    env: ModelServer,
) -> None:
    """`/knowledge` alone, with no folder, said only "No knowledge folder": not what the
    command does nor that it takes a query, as /memory's usage line says."""
    async with chat_at(80) as (repl, out):
        await repl.handle("/knowledge")
        alone = out.getvalue()
        await repl.handle("/k salt guild")
    assert "Usage: /knowledge QUERY: search the notes of your knowledge folders" in alone
    assert "seelen knowledge add PATH" in alone
    assert len(alone.strip().splitlines()) == 2, alone  # one line each at 80 columns
    asked = out.getvalue()[len(alone) :]  # with a query: how to add a folder, no usage line
    assert "seelen knowledge add PATH" in asked and "Usage" not in asked, asked
    assert env.chat_requests() == []  # a slash command, never sent to the model


def test_forget_names_its_argument_alike_in_usage_and_error(data_dir: Path) -> None:
    """`memory forget` alone printed "Usage: … [text_id]" above "give a TEXT_ID": the
    name a user reads twice, spelt two ways. `memory search` said [query] / QUERY."""
    stored_profile(data_dir)
    forget = run_cli("memory", "forget")
    assert forget.returncode == 2
    assert "seelen memory forget [OPTIONS] [TEXT_ID]" in forget.stderr, forget.stderr
    assert "give a TEXT_ID" in forget.stderr, forget.stderr
    search = run_cli("memory", "search")
    assert "seelen memory search [OPTIONS] [QUERY]" in search.stderr, search.stderr
    assert "give a QUERY" in search.stderr, search.stderr


def test_every_commands_arguments_are_named_in_capitals_in_its_usage() -> None:
    """Usage lines named arguments as typer spells the parameter ("[question]", "{path}")
    while errors, docstrings and `import`'s FILE say QUESTION, PATH: one way for all."""
    import typer
    from typer.core import TyperArgument

    from seelen.cli.main import app

    def commands(group: Any, path: str) -> list[tuple[str, Any]]:
        found = [(path, group)]
        for name, sub in getattr(group, "commands", {}).items():
            found += commands(sub, f"{path} {name}")
        return found

    arguments = [
        (path, p)
        for path, cmd in commands(typer.main.get_command(app), "seelen")
        for p in cmd.params
        if isinstance(p, TyperArgument)
    ]
    assert len(arguments) >= 10  # the walk reached the sub-commands
    lower = [f"{path}: {p.name}" for path, p in arguments if not (p.metavar or "").isupper()]
    assert lower == [], lower
