"""`seelen import --from chatgpt|claude|llm`: as the user runs it, with the facts found again
by `memory search` and in the chat. llm's logs.db is written by llm itself."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import open_store, owner_serves, piped_chat, run_cli, run_seelen, wait_until
from history_exports import chatgpt_export, claude_export, write_zip
from model_server import ModelServer, Reply
from typer.testing import CliRunner

from seelen.cli.imports import STOPPED_WAITING
from seelen.cli.main import app
from seelen.client import place
from seelen.client.connect import request
from seelen.config import load_settings
from seelen.protocol import calls

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def search(query: str, *extra: str) -> dict:
    found = CliRunner().invoke(app, ["memory", "search", "--json", *extra, query])
    assert found.exit_code == 0, found.output
    return json.loads(found.stdout)


def test_a_chatgpt_zip_is_recognised_imported_once_and_found(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIMEZONE", "UTC")
    export = write_zip(tmp_path / "chatgpt-export.zip", chatgpt_export())
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(export)])
    assert result.exit_code == 0, result.output
    assert "Imported 6 turns in 2 new sessions from ChatGPT (2 conversations" in result.output
    assert open_store(data_dir).count_unindexed() == 0  # embedded before it returned

    top = search("what is my sourdough starter called")["turns"][0]
    assert top["text"] == "My sourdough starter is called Gerald."
    assert top["time"] == "2024-05-21T10:13:20.250+00:00" and top["role"] == "user"
    assert "vector" in top["rankers"]
    summaries = search("rooftop beekeeping")["summaries"]
    assert summaries[0]["text"].startswith("ChatGPT conversation “Rooftop beekeeping”")

    again = runner.invoke(app, ["import", "--from", "chatgpt", str(export)])
    assert again.exit_code == 0, again.output
    assert "Imported 0 turns in 0 new sessions" in again.output
    assert "everything was already here" in again.output
    assert open_store(data_dir).count_turns() == 6


def test_claudes_facts_come_back_in_the_chat(
    env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(claude_export()), "utf-8")
    imported = CliRunner().invoke(app, ["import", "--from", "claude", str(export)])
    assert imported.exit_code == 0, imported.output
    assert "Imported 5 turns in 2 new sessions from Claude" in imported.output
    env.enqueue("A green Gazelle.")
    asked = run_cli("ask", "What kind of bike do I have?")
    assert asked.returncode == 0, asked.stderr
    prompt = json.dumps(env.last_messages())
    assert "My bike is a green Gazelle." in prompt


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("cut.zip", None, "is not a readable zip"),
        ("other.zip", b"", "holds no conversations.json"),
        ("conversations.json", b'[{"mapping": {"a": ', "not JSON, or cut short"),
        ("list.json", b'[{"title": "x"}]', "not ChatGPT's or Claude's"),
    ],
)
def test_a_file_that_is_not_such_an_export_changes_nothing(
    tmp_path: Path, data_dir: Path, name: str, content: bytes | None, says: str
) -> None:
    path = tmp_path / name
    if content is None:
        full = write_zip(tmp_path / "full.zip", chatgpt_export()).read_bytes()
        path.write_bytes(full[: len(full) // 2])
    elif name == "other.zip":
        from history_exports import zip_bytes_without_conversations

        path.write_bytes(zip_bytes_without_conversations())
    else:
        path.write_bytes(content)
    result = run_cli("import", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith("seelen: import: ") and says in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert not (data_dir / "default").exists()  # the profile was not even opened


@pytest.fixture
def llm_logs(model_server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A logs.db written by simonw/llm itself, talking to the test model server: a one-off
    prompt with a system prompt, then a two-prompt `llm chat`.

    llm's own command runs in this process, through click as its `llm` script runs it: two
    `llm` processes cost 3-4 s of CPU (each imports openai and pydantic anew) for nothing
    this test looks at; what it reads is the logs.db that llm's code wrote."""
    home = tmp_path / "llm-home"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: fake\n  model_name: test-model\n  api_base: {model_server.url}\n"
        "  api_key_name: fake\n"
    )
    (home / "keys.json").write_text('{"fake": "sk-llm"}')
    monkeypatch.setenv("LLM_USER_PATH", str(home))
    # No plugins: the bundled GGUF's llm plugin needs llama-cpp-python, which is not here
    # (llm reads this when it is first imported).
    monkeypatch.setenv("LLM_LOAD_PLUGINS", "")
    from click.testing import CliRunner as ClickRunner
    from llm.cli import cli as llm

    model_server.enqueue("Hello!", "Lisbon is lovely in May.", "Pack light.")
    runner = ClickRunner()
    for args, typed in (
        (["-m", "fake", "hi", "-s", "Be brief."], ""),
        (["chat", "-m", "fake"], "I am moving to Lisbon in May\nWhat should I pack?\nquit\n"),
    ):
        ran = runner.invoke(llm, args, input=typed)
        assert ran.exit_code == 0, (ran.output, ran.exception)
    return home / "logs.db"


def test_llm_logs_import_from_where_llm_keeps_them(llm_logs: Path, data_dir: Path) -> None:
    # LLM_USER_PATH: set by llm_logs, as where llm keeps its logs.
    runner = CliRunner()
    result = runner.invoke(app, ["import", "--from", "llm"])
    assert result.exit_code == 0, result.output
    assert "Imported 6 turns in 2 new sessions from llm (2 conversations" in result.output

    with sqlite3.connect(llm_logs) as db:
        logged = db.execute(
            "SELECT s.prompt, s.response, t.datetime_utc, t.duration_ms FROM turns t "
            "JOIN turn_search s ON s.turn_id = t.id ORDER BY t.datetime_utc"
        ).fetchall()
    store = open_store(data_dir)
    sessions = store.sessions_with_status("archived")  # oldest first
    assert len(sessions) == 2
    stored = [t for s in sessions for t in store.turns(s.session_id)]
    assert [(t.role, t.text) for t in stored] == [
        ("user", "hi"),  # the system prompt is not a turn
        ("assistant", "Hello!"),
        ("user", "I am moving to Lisbon in May"),
        ("assistant", "Lisbon is lovely in May."),
        ("user", "What should I pack?"),
        ("assistant", "Pack light."),
    ]
    for (_, _, when, duration), (asked, answered) in zip(
        logged, zip(stored[::2], stored[1::2], strict=True), strict=True
    ):
        start = (datetime.fromisoformat(when) - EPOCH) // timedelta(milliseconds=1)
        assert (asked.ts_ms, answered.ts_ms) == (start, start + duration)
    assert search("moving to Lisbon")["turns"][0]["text"] == "I am moving to Lisbon in May"

    again = runner.invoke(app, ["import", str(llm_logs)])  # recognised by its content
    assert again.exit_code == 0, again.output
    assert "everything was already here" in again.output
    assert open_store(data_dir).count_turns() == 6


def test_an_import_is_searchable_at_once_and_embedded_by_the_owner(
    env: ModelServer, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEELEN_OWNER", "true")
    env.responder = lambda body: Reply(text="ok")
    export = write_zip(tmp_path / "export.zip", claude_export())
    try:
        result = run_seelen("import", str(export))
        assert result.returncode == 0, result.stderr
        assert "the background" in result.stderr
        store = open_store(data_dir)
        found = store.get_turns(i for i, _ in store.search_turns_text("green Gazelle", 1))
        assert [t.text for t in found.values()] == ["My bike is a green Gazelle."]
        stats = run_cli("db", "stats")  # beside the owner, which is still embedding
        assert "waiting to be indexed" in stats.stdout
        wait_until(lambda: store.count_unindexed() == 0, 60, "the owner embeds the import")
        found = {t["text"]: t for t in search("which bike do I ride")["turns"][:2]}
        assert "vector" in found["My bike is a green Gazelle."]["rankers"]
    finally:
        request(place.socket_path(load_settings()), calls.Stop())


def test_an_import_while_a_chat_is_open_goes_through_the_chat_and_its_recall_finds_it(
    owner_env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    export = write_zip(tmp_path / "export.zip", claude_export())
    chat = piped_chat()
    try:
        assert chat.stdin is not None
        chat.stdin.write("hello from the chat\n")
        chat.stdin.flush()
        wait_until(lambda: owner_serves("chat", chat), 60, "the chat never served the profile")
        result = run_cli("import", str(export))  # another terminal's command, to the chat
        assert result.returncode == 0, result.stderr
        assert "waiting for" not in result.stderr
        assert "Imported 5 turns" in result.stderr and "Keyword search finds them" in result.stderr
        out, _err = chat.communicate("which bike do I ride?\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and "answer to which bike do I ride?" in out
    # The chat's own recall put the imported turn in its prompt for that question.
    assert "My bike is a green Gazelle." in json.dumps(owner_env.chat_requests()[-1])


def test_import_wait_returns_once_every_text_has_its_vector(
    owner_env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    export = write_zip(tmp_path / "export.zip", claude_export())
    result = run_seelen("import", "--wait", str(export), timeout=90)
    assert result.returncode == 0, result.stderr
    assert "Every imported text is embedded" in result.stderr
    store = open_store(data_dir)
    assert store.count_turns() == 5 and store.count_unindexed() == 0


def test_summarize_says_what_it_costs_then_replaces_the_made_up_summaries(
    env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(claude_export()), "utf-8")
    env.enqueue("The user takes the 8:15 train to Trieste.", "The user rides a green Gazelle.")
    result = CliRunner().invoke(app, ["import", "--summarize", str(export)])
    assert result.exit_code == 0, result.output
    assert "Summarising 2 conversations with test-model: 2 requests, about " in result.output
    assert "Summarised 2 conversations with the tool model." in result.output
    requests = env.chat_requests()
    assert len(requests) == 2 and "green Gazelle" in json.dumps(requests[1]["messages"])
    store = open_store(data_dir)
    summaries = [
        store.session_summary(s.session_id) for s in store.sessions_with_status("archived")
    ]
    assert sorted(s.text for s in summaries if s) == [
        "The user rides a green Gazelle.",
        "The user takes the 8:15 train to Trieste.",
    ]
    assert store.count_unindexed() == 0

    again = CliRunner().invoke(app, ["import", "--summarize", str(export)])
    assert again.exit_code == 0, again.output
    assert "has the tool model's summary already" in again.output
    assert len(env.chat_requests()) == 2  # nothing was sent twice


def test_a_file_that_is_no_export_is_one_line_through_the_owner_too(
    owner_env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    bad = tmp_path / "conversations.json"
    bad.write_text('[{"mapping": {"a": ', "utf-8")
    (data_dir / "default").mkdir(parents=True)  # a profile that exists: the owner reads it
    result = run_seelen("import", str(bad), timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("seelen: import: not JSON, or cut short")
    assert result.stderr.count("\n") == 1
    assert open_store(data_dir).count_turns() == 0


def test_import_without_a_file_is_a_usage_error(data_dir: Path) -> None:
    """`seelen import` alone exited 1, as for a file that failed: no FILE is a usage error."""
    result = run_cli("import")
    assert result.returncode == 2
    assert "invalid value for FILE: give a FILE (or - for standard input)" in result.stderr
    assert "; usage: seelen import [OPTIONS] [FILE]" in result.stderr


def test_ctrl_c_while_an_import_waits_for_the_owner_says_what_goes_on(
    env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    """Ctrl-C left an empty line and exit 130: the user could not know that the background
    process goes on with an import it took."""
    import signal

    env.enqueue(Reply(text="late", delay=30))  # an in-process ask holds the profile meanwhile
    holder = subprocess.Popen(
        [sys.executable, "-m", "seelen", "ask", "hold on"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    export = write_zip(tmp_path / "chatgpt.zip", chatgpt_export())
    importer = None
    try:
        wait_until(lambda: place.lock_held(data_dir / "default"), 30, "the ask never started")
        importer = subprocess.Popen(
            [sys.executable, "-m", "seelen", "import", str(export)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SEELEN_OWNER": "true"},
        )
        assert importer.stderr is not None
        waiting = importer.stderr.readline()
        assert waiting.startswith("waiting for another `seelen ask`"), waiting
        importer.send_signal(signal.SIGINT)
        out, err = importer.communicate(timeout=30)
        *before, last = err.splitlines()  # the wait may be said again (a second try)
    finally:
        for process in (holder, importer):
            if process is not None and process.poll() is None:
                process.kill()
    assert importer.returncode == 130 and out == ""
    assert last == STOPPED_WAITING and all(line.startswith("waiting for") for line in before)


def test_ctrl_c_while_an_import_embeds_in_this_process_keeps_every_text(
    env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    """Ctrl-C while `import` embedded (no owner) left an empty line and exit 130: whether the
    import had happened, and what would embed the rest, went unsaid."""
    import signal

    from history_exports import gpt_conversation, gpt_message

    from seelen.cli.data import STOPPED_EMBEDDING

    conversations = []
    for c in range(300):  # 2,100 texts: about 15 s of embedding, interrupted at once
        nodes: list[tuple[str, str | None, object]] = [("root", None, None)]
        for i in range(6):
            role = "user" if i % 2 == 0 else "assistant"
            words = [f"conversation {c} message {i}"]
            nodes.append(
                (
                    f"m{c}-{i}",
                    nodes[-1][0],
                    gpt_message(f"m{c}-{i}", role, words, time=1.7e9 + c * 60 + i),
                )
            )
        conversations.append(gpt_conversation(f"c{c}", f"title {c}", nodes, f"m{c}-5"))
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(conversations), "utf-8")
    importer = subprocess.Popen(
        [sys.executable, "-m", "seelen", "import", str(export)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert importer.stderr is not None
        said = []
        while not said or "Keyword search finds them now." not in said[-1]:
            said.append(importer.stderr.readline())
            assert said[-1], said
        importer.send_signal(signal.SIGINT)
        out, err = importer.communicate(timeout=60)
    finally:
        if importer.poll() is None:
            importer.kill()
    assert importer.returncode == 130 and out == ""
    assert STOPPED_EMBEDDING + "\n" in err and "Traceback" not in err
    store = open_store(data_dir)
    assert store.count_turns() == 1800 and store.count_unindexed() > 0
