"""The `seelen` command: piped chat, one-shot ask, JSON, usage errors, and (as a real
process) crash safety."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from helpers import asked, open_store, run_cli, wait_until
from model_server import ModelServer, Reply

from seelen.store import ARCHIVED


def test_piped_chat_runs_slash_commands(env: ModelServer, data_dir: Path) -> None:
    env.responder = lambda body: Reply(text=f"echo: {asked(body)}")
    result = run_cli("chat", stdin="hi there\n/why\n/bogus\n/save\nafter save\n")
    assert result.returncode == 0, result.stderr
    assert "echo: hi there" in result.stdout
    # One line in a pipe, however long (it was broken at 80 columns, a space left at the end).
    why = "No past memory matched: recall searches earlier sessions; this chat's own turns"
    assert f"{why} are in the prompt already.\n" in result.stdout
    assert "Unknown command /bogus" in result.stdout
    assert "Session archived" in result.stdout
    store = open_store(data_dir)
    sessions = store.list_sessions()
    assert len(sessions) == 2
    old, new = sessions[1], sessions[0]
    assert old.status == ARCHIVED
    assert [t.text for t in store.turns(old.session_id) if t.role == "user"] == ["hi there"]
    assert [t.text for t in store.turns(new.session_id) if t.role == "user"] == ["after save"]
    # The unknown command never reached the model.
    assert not any("/bogus" in json.dumps(r) for r in env.chat_requests())


def test_ask_answers_from_stdin_and_argument(env: ModelServer, data_dir: Path) -> None:
    env.enqueue("Paris.", "Berlin.")
    piped = run_cli("ask", stdin="Capital of France?\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "Paris.\n"
    direct = run_cli("ask", "Capital of Germany?")
    assert direct.stdout == "Berlin.\n"
    store = open_store(data_dir)
    sid = store.active_session().session_id
    assert [t.text for t in store.turns(sid)] == [
        "Capital of France?",
        "Paris.",
        "Capital of Germany?",
        "Berlin.",
    ]


def test_ask_json_prints_one_object(env: ModelServer, data_dir: Path) -> None:
    env.enqueue(Reply(text="**42**", prompt_tokens=11, completion_tokens=3))
    result = run_cli("ask", "--json", "meaning of life?")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["reply"] == "**42**"
    assert payload["usage"]["prompt_tokens"] == 11
    assert payload["usage"]["completion_tokens"] == 3
    assert payload["session_id"] == open_store(data_dir).active_session().session_id


def test_ask_ephemeral_keeps_nothing(env: ModelServer, data_dir: Path) -> None:
    env.enqueue("temporary")
    result = run_cli("ask", "--ephemeral", "--json", "forget me")
    assert json.loads(result.stdout)["reply"] == "temporary"
    # Answered in this process, the profile is read-only: not even its database is created.
    db = data_dir / "default" / "chat_sessions.db"
    assert not db.exists() or open_store(data_dir).count_turns() == 0


def test_ask_failure_exits_nonzero_and_keeps_question(env: ModelServer, data_dir: Path) -> None:
    env.responder = lambda body: Reply(status=500)
    result = run_cli("ask", "will this survive?", env={"MAX_RETRIES": "0"})
    assert result.returncode == 1
    assert "answered 500" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""
    store = open_store(data_dir)
    assert [t.text for t in store.turns(store.active_session().session_id)] == [
        "will this survive?"
    ]


def test_ask_json_failure_is_one_json_object_on_stdout(env: ModelServer, data_dir: Path) -> None:
    """A JSON caller got an empty stdout when the answer failed: nothing to parse."""
    env.responder = lambda body: Reply(status=500)
    result = run_cli("ask", "--json", "will this survive?", env={"MAX_RETRIES": "0"})
    assert result.returncode == 1
    [line] = result.stderr.splitlines()[:1]
    payload = json.loads(result.stdout)
    assert payload["reply"] is None and payload["saved"] is True
    assert line == f"seelen: {payload['error']}" and "answered 500" in payload["error"]
    # Before anything starts: a setting that cannot work (exit 2), an empty question (2).
    bad = run_cli("ask", "--json", "hi", env={"SEELEN_IDLE_MINUTES": "soon"})
    assert bad.returncode == 2
    assert bad.stderr == f"seelen: {json.loads(bad.stdout)['error']}\n"
    empty = run_cli("ask", "--json", stdin="  \n")
    assert empty.returncode == 2 and json.loads(empty.stdout)["error"].startswith("give a question")


def test_kill_during_reply_loses_no_committed_turn(env: ModelServer, data_dir: Path) -> None:
    env.enqueue(Reply(text=" ".join(["word"] * 200), chunk_delay=0.05))
    proc = subprocess.Popen(
        [sys.executable, "-m", "seelen", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"a message that must survive\n")
    proc.stdin.flush()
    shown = bytearray()

    def reply_under_way() -> bool:  # the first words are on the screen: kill mid-stream
        while select.select([proc.stdout], [], [], 0)[0] and (chunk := os.read(fd, 4096)):
            shown.extend(chunk)
        return b"word word" in shown

    fd = proc.stdout.fileno()
    wait_until(reply_under_way, 30, "the reply never started streaming")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    store = open_store(data_dir)
    session = store.active_session()
    assert [t.text for t in store.turns(session.session_id)] == ["a message that must survive"]
    # The next start restores the session, and the question can be answered.
    env.enqueue("It survived.")
    result = run_cli("chat", stdin="/retry\n")
    assert "It survived." in result.stdout


def test_help_explains_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for name in ("chat", "ask", "save"):
        assert name in result.stdout


def test_every_help_speaks_to_a_user_not_of_click_types() -> None:
    """--help showed `--limit <int range>` and `--ephemeral / --no-ephemeral [default:
    no-ephemeral]`; the commands a newcomer starts with showed no example."""
    import click
    import typer

    from seelen.cli.main import app

    def walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
        paths = [path]
        for name, sub in getattr(command, "commands", {}).items():
            paths += walk(sub, (*path, name))
        return paths

    paths = walk(typer.main.get_command(app), ())
    assert len(paths) > 30  # every command and group
    helps = {path: run_cli(*path, "--help") for path in paths}
    for path, shown in helps.items():
        assert shown.returncode == 0, path
        assert "int range" not in shown.stdout and "--no-" not in shown.stdout, path
    for path in (("ask",), ("memory", "search"), ("import",), ("export",), ("knowledge", "add")):
        assert "Example" in helps[path].stdout and f"  seelen {path[0]}" in helps[path].stdout


def test_version_and_h_answer_as_a_newcomer_types_them(data_dir: Path) -> None:
    """`seelen --version` and `-h` were "No such option" (exit 2); --version starts no chat
    and opens no profile."""
    import re

    import seelen
    from seelen.client.place import code_version

    shown = run_cli("--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"seelen {code_version()}\n"
    assert re.fullmatch(rf"seelen {re.escape(seelen.__version__)}\+[0-9a-f]{{12}}\n", shown.stdout)
    assert not data_dir.exists()
    for command in ((), ("memory", "search"), ("ask",)):
        assert run_cli(*command, "-h").stdout == run_cli(*command, "--help").stdout != ""


def test_invalid_utf8_on_stdin_is_kept_not_fatal(env: ModelServer, data_dir: Path) -> None:
    env.enqueue("Got it.")
    result = run_cli("ask", stdin=b"caf\xe9 au lait\n")
    assert result.returncode == 0, result.stderr
    store = open_store(data_dir)
    assert store.turns(store.active_session().session_id)[0].text == "caf\ufffd au lait"


def test_profile_flag_works_before_and_after_the_command(env: ModelServer, data_dir: Path) -> None:
    env.enqueue("one", "two")
    assert run_cli("-p", "work", "ask", "first").returncode == 0
    assert run_cli("ask", "--profile", "work", "second").returncode == 0
    store = open_store(data_dir, "work")
    texts = [t.text for t in store.turns(store.active_session().session_id)]
    assert texts == ["first", "one", "second", "two"]
    assert not (data_dir / "default" / "chat_sessions.db").exists()


def test_usage_errors_are_explained_with_exit_code_2() -> None:
    result = run_cli("memory", "search", "--mode", "bogus", "x")
    assert result.returncode == 2
    assert "invalid value for --mode" in result.stderr and "internal error" not in result.stderr
    unknown = run_cli("nosuchcmd")
    assert unknown.returncode == 2 and "no such command" in unknown.stderr
    empty = run_cli("ask", "  ")
    assert empty.returncode == 2 and "give a question" in empty.stderr


def test_shell_completion_can_be_installed() -> None:
    result = run_cli("--help")
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout
