"""What a demanding user met: a session whose archive waits shown as such everywhere, the
bench's rows without a command's stray lines, and the faults of a new user's first hour."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from helpers import failed_archive, open_store, run_cli, run_seelen
from model_server import ModelServer, Reply

from seelen.app.build import chat_model
from seelen.config import load_settings
from seelen.errors import ConfigError, ModelError
from seelen.memory.clock import Clock
from seelen.memory.persona import PersonaFiles
from seelen.memory.transfer import render_export
from seelen.models.chat import OpenAIChatModel
from seelen.models.provider import choose_provider
from seelen.protocol import calls
from seelen.protocol.text import sessions_text
from seelen.runtime import open_reader
from seelen.service import reading
from seelen.store import Store


def test_sessions_show_calls_a_session_whose_archive_waits_archive_pending(
    data_dir: Path,
) -> None:
    """`sessions list` said "archive pending" while `sessions show` titled the same session
    "(active)": two active sessions for one user."""
    old, new = failed_archive(data_dir)
    shown = run_cli("sessions", "show", old[:8])
    assert shown.returncode == 0, shown.stderr
    assert f"Session {old} (archive pending)" in shown.stdout.splitlines()[0], shown.stdout
    talked_in = run_cli("sessions", "show", new[:8])
    assert f"Session {new} (active)" in talked_in.stdout.splitlines()[0], talked_in.stdout


async def test_the_model_and_mcp_clients_see_a_waiting_archive_as_pending(
    data_dir: Path,
) -> None:
    """`recent_sessions` (MCP clients' models, through `seelen mcp` and the owner) gave the
    stored status: "active" for a session no one talks in any more."""
    old, new = failed_archive(data_dir)
    app = open_reader(load_settings())
    try:
        listed = reading.recent_sessions(app, calls.ListSessions(n=5))
    finally:
        await app.aclose()
    status = {s.session_id: s.status for s in listed.sessions}
    assert status == {old: "archive pending", new: "active"}
    assert f"session {old} (archive pending, 1 turn)" in sessions_text(listed)
    store = open_store(data_dir)  # told so, stored as it was: the next start finishes it
    assert store.get_session(old).status == "active"  # type: ignore[union-attr]
    assert [s.session_id for s in store.pending_archives()] == [old]
    assert store.active_session().session_id == new  # type: ignore[union-attr]
    store.close()


def test_the_scale_tables_mcp_row_prints_its_row_alone(
    data_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """bench_scale.py's `seelen mcp` row printed bench_mcp_server's own four lines into the
    Markdown table, and each start's "seelen mcp: serves …" on stderr between the rows."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import scale_rows

    seelen = str(Path(sys.executable).with_name("seelen"))
    # The test's own data dir, so that the owner `seelen mcp` starts ends with the test.
    scale_rows.mcp_row(seelen, data_dir, "http://127.0.0.1:9/v1", starts=1)
    out, err = capfd.readouterr()
    assert out.splitlines() == [out.strip()] and out.startswith("| `seelen mcp`: start"), out
    assert "median" in out and "MiB" in out, out
    assert err == ""


def editor(folder: Path, body: str) -> str:
    """An editor program: a shell script doing `body` to the file it is given ($1)."""
    path = folder / "editor.sh"
    path.write_text(f"#!/bin/sh\n{body}\n", "utf-8")
    path.chmod(0o700)
    return str(path)


def test_an_edit_the_editor_fails_on_is_kept_aside_never_lost(
    data_dir: Path, tmp_path: Path
) -> None:
    """An editor that ended with a status (vim's :cq, a crash after writing), or left bytes
    that are not UTF-8, threw the user's edit away with its temporary folder (the second
    said "internal error: UnicodeDecodeError"); one that removed the file named that folder."""
    assert run_cli("persona", "edit", env={"EDITOR": "true", "VISUAL": ""}).returncode == 0
    before = run_cli("persona", "show").stdout
    for body, said, kept in (
        ('echo "my new line" >> "$1"; exit 1', "ended with status 1", b"\nmy new line\n"),
        ('printf "caf\\351" >> "$1"', "is not UTF-8 text (byte 0xe9 at offset", b"caf\xe9"),
    ):
        result = run_cli("persona", "edit", env={"EDITOR": editor(tmp_path, body), "VISUAL": ""})
        assert result.returncode == 1, result.stderr
        assert said in result.stderr and result.stderr.count("\n") == 1, result.stderr
        aside = Path(result.stderr.split("your edit is kept in ")[1].strip())
        try:
            assert aside.read_bytes().endswith(kept) and aside.stat().st_mode & 0o077 == 0
        finally:
            aside.unlink()
        assert run_cli("persona", "show").stdout == before
    removed = run_cli("persona", "edit", env={"EDITOR": editor(tmp_path, 'rm "$1"'), "VISUAL": ""})
    assert removed.stderr.endswith("left no file to read; persona_memory.txt is unchanged\n")
    unchanged = run_cli("persona", "edit", env={"EDITOR": "false", "VISUAL": ""})
    assert "kept in" not in unchanged.stderr  # nothing typed, nothing to keep


def test_a_wrong_flag_or_value_is_one_line_naming_the_command_and_its_usage() -> None:
    """Click printed four lines (usage, "Try 'seelen ask -h'", a blank, "Error: …") for a
    misspelt flag, and "Error: Option '--format' requires an argument." without a name."""
    for args, said in (
        (("ask", "--bogus"), "seelen ask: no such option: --bogus; usage: seelen ask [OPTIONS]"),
        (
            ("sessions", "list", "--limit", "0"),
            "seelen sessions list: invalid value for '--limit': 0 is not in the range x>=1; "
            "usage: seelen sessions list [OPTIONS]",
        ),
        (("nosuchcmd",), "seelen: no such command 'nosuchcmd'; usage: seelen [OPTIONS] COMMAND"),
        (("export", "--format"), "seelen: option '--format' requires an argument"),
    ):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith(said) and result.stderr.count("\n") == 1, result.stderr


def test_a_group_without_its_command_lists_its_commands() -> None:
    """`seelen db` alone said "missing command" and its usage line, naming none of the
    commands a newcomer was looking for: it shows the group's help (exit 2, on stderr)."""
    for group, command in (("db", "backup"), ("memory", "search"), ("sessions", "show")):
        result = run_cli(group)
        assert result.returncode == 2, result.stderr
        assert f"Usage: seelen {group} [OPTIONS] COMMAND" in result.stderr
        assert f" {command} " in result.stderr, result.stderr


def test_a_dotenv_line_python_dotenv_cannot_read_is_named_in_seelens_words(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """An open quote printed python-dotenv's own log line, "python-dotenv could not parse
    statement starting at line 1": neither the program nor the file named."""
    dotenv = tmp_path / ".env"
    dotenv.write_text('OPENAI_API_KEY="sk-open\nTEMPERATURE=0.5\n', "utf-8")
    told: list[str] = []
    settings = load_settings({}, environ={}, dotenv_path=dotenv, warn=told.append)
    assert settings.temperature == 0.5  # the other lines are read as before
    assert told == [f"{dotenv}, line 1: not a KEY=value line (a quote left open?); ignored"]
    assert "python-dotenv" not in capfd.readouterr().err


async def test_a_refused_key_or_an_unreachable_endpoint_names_the_setting_to_check(
    env: ModelServer,
) -> None:
    """ "answered 401: Incorrect API key provided" and "cannot reach the model at …" said
    what went wrong but not what to do. The bundled local model names no setting."""
    settings = load_settings()
    model = chat_model(settings, choose_provider(settings), 0)
    env.enqueue(Reply(status=401))
    with pytest.raises(ModelError) as refused:
        await model.complete([{"role": "user", "content": "hello"}])
    said = str(refused.value)
    assert "answered 401: Incorrect API key provided: check OPENAI_API_KEY" in said, said
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    running = ": is it running? check OPENAI_BASE_URL (the environment or .env)"
    for named, hint in ((True, running), (False, "")):
        down = OpenAIChatModel(
            base_url=f"http://127.0.0.1:{closed}/v1",
            api_key="sk-test",
            model="m",
            max_retries=0,
            settings_named=named,
        )
        with pytest.raises(ModelError) as failed:
            await down.complete([{"role": "user", "content": "hello"}])
        assert str(failed.value) == f"cannot reach the model at http://127.0.0.1:{closed}/v1{hint}"


def test_a_base_url_that_is_no_web_address_is_refused_at_once(data_dir: Path) -> None:
    """`OPENAI_BASE_URL=localhost:11434/v1` (the scheme left out) was taken, and every
    question then failed after four tries with "cannot reach the model at localhost…"."""
    for given in ("localhost:11434/v1", "notaurl", "http://"):
        with pytest.raises(ConfigError) as refused:
            load_settings(environ={"OPENAI_BASE_URL": given})
        expected = f"OPENAI_BASE_URL: expected an http:// or https:// address, got {given!r}"
        assert str(refused.value) == expected
    assert load_settings(environ={"OPENAI_BASE_URL": " HTTPS://h:1/v1 "}).openai_base_url == (
        "HTTPS://h:1/v1"
    )
    asked = run_cli("ask", "hi", env={"OPENAI_BASE_URL": "localhost:11434/v1"})
    assert asked.returncode == 2 and asked.stderr.count("\n") == 1, asked.stderr
    assert not (data_dir / "default").exists()  # refused before anything was stored


async def test_a_dumb_terminal_opens_the_profile_before_the_first_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With TERM=dumb prompt-toolkit reads each line with a plain prompt of its own and never
    draws the session's app: the profile, opened after the first draw, never opened, and the
    first line ended the chat with "internal error: AssertionError: the profile is still
    opening"."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import create_pipe_input

    from seelen.chat.input import read_lines

    monkeypatch.setenv("TERM", "dumb")
    events: list[str] = []

    async def handle(line: str) -> bool:
        events.append(f"line {line}")
        return False

    with create_pipe_input() as pipe:
        pipe.send_text("hello\r")
        session: PromptSession[str] = PromptSession(input=pipe)  # the default output: dumb
        await read_lines(session, handle, print, lambda: events.append("shown"))
    assert events == ["shown", "line hello"]


def test_a_version_number_restore_does_not_have_is_a_usage_error(data_dir: Path) -> None:
    """`persona restore 0` or `9` (of 3 versions) exited 1 with "the persona has 3 earlier
    versions; see history": a wrong value, which every other command answers with exit 2."""
    assert run_cli("persona", "restore").stderr == (
        "seelen: the persona has no earlier version yet\n"  # a state, not a wrong value
    )
    for text in ("first", "second", "third"):  # earlier: the shipped one, first, second
        assert (
            run_cli("persona", "edit", env={"EDITOR": f"sh -c 'echo {text} > $0'"}).returncode == 0
        )
    for number in ("0", "9"):
        result = run_cli("persona", "restore", number)
        assert result.returncode == 2, result.stderr
        assert "the persona has 3 earlier versions: give 1 to 3" in result.stderr
    assert run_cli("persona", "show").stdout == "third\n"
    assert run_cli("persona", "restore", "2").returncode == 0
    assert run_cli("persona", "show").stdout.strip() == "first"


def test_the_markdown_export_keeps_each_texts_own_markdown_inside_it(tmp_path: Path) -> None:
    """A reply's own "## Step 1" and a summary's second line were bare lines of the export:
    a reader (or a Markdown viewer's outline) took the reply's heading for a new section,
    and a summary's list left its quote."""
    files = PersonaFiles(tmp_path)
    files.ensure()
    store, clock = Store(tmp_path / "chat_sessions.db"), Clock("UTC")
    sid = store.create_session(start_ms=1_000).session_id
    reply = "Here is how.\n\n## Step 1\n- water the tomatoes"
    store.add_turns(sid, [("user", "how do I grow tomatoes?", None, 1_000)])
    store.add_turns(sid, [("assistant", reply, None, 2_000)])
    store.add_summary(sid, "Tomatoes.\n- water daily", 1_000, 2_000)
    store.mark_archived(sid)
    markdown = render_export(store, files, clock, "markdown")
    store.close()
    sections = [line for line in markdown.splitlines() if line.startswith("#")]
    assert sections == [
        "# Seelen memory export",
        "## Persona",
        "## User profile",
        f"## Session {sid[:12]} (1970-01-01T00:00, archived)",
    ]
    assert "> Here is how.\n>\n> ## Step 1\n> - water the tomatoes" in markdown
    assert "*summary:*\n\n> Tomatoes.\n> - water daily" in markdown


def test_text_the_outputs_encoding_cannot_write_is_one_line_naming_the_fix(
    data_dir: Path,
) -> None:
    """PYTHONIOENCODING=ascii (or a Latin-1 locale) and a Chinese profile printed "internal
    error: UnicodeEncodeError"; the user is told what to set, and the file is untouched."""
    (data_dir / "default").mkdir(parents=True)
    open_store(data_dir).close()
    profile = data_dir / "default" / "user_profile.txt"
    profile.write_text("我妹妹莱娜住在上海\n", "utf-8")
    for encoding in ("ascii", "latin-1"):
        shown = run_seelen("profile", "show", env={"PYTHONIOENCODING": encoding})
        assert shown.returncode == 1, shown.stderr
        assert shown.stderr == (
            f"seelen: the output's encoding ({encoding}, from PYTHONIOENCODING or the locale) "
            "cannot write this text: use UTF-8 (PYTHONIOENCODING=utf-8, or a locale such as "
            "LANG=C.UTF-8)\n"
        )
    assert profile.read_text("utf-8") == "我妹妹莱娜住在上海\n"
    shown = run_seelen("profile", "show", env={"PYTHONIOENCODING": "utf-8"})
    assert shown.returncode == 0 and shown.stdout == "我妹妹莱娜住在上海\n"
