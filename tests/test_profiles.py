"""A misspelt profile is named, never silently started by a reader; `seelen profiles`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import open_store, run_cli
from model_server import ModelServer


@pytest.fixture
def two_profiles(env: ModelServer, data_dir: Path) -> None:
    for name in ("default", "work"):
        (data_dir / name).mkdir(parents=True)
        open_store(data_dir, name).close()


@pytest.mark.parametrize(
    "command",
    [
        ["profile", "show"],
        ["memory", "search", "dog"],
        ["sessions", "list"],
        ["export"],
        ["knowledge", "list"],
        ["knowledge", "search", "dog"],
        # Writers that only maintain a profile start none either.
        ["db", "check"],
        ["db", "repair"],
        ["db", "optimize"],
        ["db", "backup"],
        ["db", "restore"],
        ["memory", "forget", "abcd"],
        ["memory", "forget", "--session", "abcd"],
        ["memory", "reindex"],
    ],
)
def test_a_reader_of_a_misspelt_profile_names_the_existing_ones(
    two_profiles: None, data_dir: Path, command: list[str]
) -> None:
    result = run_cli("--profile", "wrok", *command)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"seelen: there is no profile 'wrok' in {data_dir} (its profiles: default, work); "
        "a chat, an ask or an import with that name would start it"
    ]
    assert result.stdout == ""
    assert sorted(p.name for p in data_dir.iterdir()) == ["default", "work"]  # none created


def test_profiles_are_listed_and_a_chat_says_when_one_is_new(
    two_profiles: None, data_dir: Path
) -> None:
    assert run_cli("profiles").stdout == "default  (in use)\nwork\n"
    chat = run_cli("--profile", "travel", "chat", stdin="hello\n")
    assert chat.returncode == 0, chat.stderr
    said = " ".join(chat.stdout.split())
    assert (
        "'travel' is a new profile: nothing is remembered in it yet (the others: default, work)"
        in said
    )
    assert run_cli("-p", "travel", "profiles").stdout == "default\ntravel  (in use)\nwork\n"


def test_an_ask_and_an_import_say_on_stderr_when_they_start_a_profile(
    two_profiles: None, env: ModelServer, tmp_path: Path
) -> None:
    note = "'{}' is a new profile: nothing is remembered in it yet (the others: {})"
    env.enqueue("hi")
    ask = run_cli("--profile", "wrok", "ask", "hello")
    assert (ask.returncode, ask.stdout) == (0, "hi\n")  # the answer alone on stdout
    assert ask.stderr.splitlines()[0] == note.format("wrok", "default, work")
    export = tmp_path / "export.json"
    export.write_text(run_cli("export").stdout)
    imported = run_cli("--profile", "wrk", "import", str(export))
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr.splitlines()[0] == note.format("wrk", "default, work, wrok")
    again = run_cli("--profile", "wrk", "import", str(export))  # no longer new: no note
    assert "new profile" not in again.stderr


def test_an_ephemeral_ask_on_a_new_profile_leaves_no_session(
    env: ModelServer, data_dir: Path
) -> None:
    env.enqueue("temporary")
    result = run_cli("ask", "--ephemeral", "--json", "forget me")
    assert json.loads(result.stdout)["reply"] == "temporary"
    db = data_dir / "default" / "chat_sessions.db"
    assert not db.exists() or open_store(data_dir).list_sessions() == []
