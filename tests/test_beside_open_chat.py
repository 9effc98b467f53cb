"""Commands that change memory while a chat is open in another terminal: each either works
through the chat (persona and profile edits, as `memory forget`), or says at once, in one
line, what holds the profile and what to do (save, reindex, db restore). None waits.

Real processes: a chat open in another terminal is a process. The commands beside it run in
the test's own process (`run_cli`): a process other than the chat's, as in a second terminal.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import owner_serves, piped_chat, run_cli, wait_until
from history_exports import chatgpt_export, write_zip
from model_server import ModelServer

PIRATE = "sh -c 'echo I am a pirate who remembers everything. > \"$0\"'"


def open_chat(data_dir: Path) -> subprocess.Popen[str]:
    """A piped chat that has answered one line and serves the profile."""
    chat = piped_chat()
    assert chat.stdin is not None
    chat.stdin.write("hello there\n")
    chat.stdin.flush()
    wait_until(lambda: owner_serves("chat", chat), 60, "the chat never served the profile")
    return chat


def test_an_edit_goes_through_the_open_chat_whose_next_turn_uses_it(
    owner_env: ModelServer, data_dir: Path
) -> None:
    """`persona edit` waited for the chat's lock (up to SEELEN_WAIT_SECONDS, then failed)."""
    chat = open_chat(data_dir)
    try:
        edited = run_cli("persona", "edit", env={"EDITOR": PIRATE, "VISUAL": ""})
        assert edited.returncode == 0, edited.stderr
        assert "waiting for" not in edited.stderr
        assert edited.stdout == "persona_memory.txt: saved (previous version kept in history/)\n"
        profile = run_cli("profile", "edit", env={"EDITOR": "sh -c 'echo tea > \"$0\"'"})
        assert profile.returncode == 0, profile.stderr
        out, err = chat.communicate("who are you?\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and "answer to who are you?" in out, err
    system = owner_env.last_messages()[0]["content"]
    assert "I am a pirate who remembers everything." in system and "tea" in system
    persona = (data_dir / "default" / "persona_memory.txt").read_text("utf-8")
    assert persona == "I am a pirate who remembers everything.\n"
    assert len(list((data_dir / "default" / "history").glob("persona_memory.*"))) == 1


def test_commands_that_need_the_profile_alone_say_so_at_once(
    owner_env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    """save, memory reindex, db restore (and import --summarize) waited SEELEN_WAIT_SECONDS
    for a chat that may stay open for hours."""
    export = str(write_zip(tmp_path / "chatgpt.zip", chatgpt_export()))
    chat = open_chat(data_dir)
    holder = f"the Seelen chat in another terminal (pid {chat.pid}) has this profile open: "
    wait = {"SEELEN_WAIT_SECONDS": "600"}
    try:
        assert run_cli("db", "backup").returncode == 0  # safe while the chat runs
        for args, advice in (
            (("save",), "type /save in it (it archives its own session)"),
            (("memory", "reindex"), "close it, then run `seelen memory reindex` again"),
            (("db", "restore"), "close it, then run `seelen db restore` again"),
            (("db", "repair"), "close it, then run `seelen db repair` again"),
            (
                ("import", "--summarize", "--yes", export),
                "close it, then run `seelen import --summarize` again",
            ),
        ):
            result = run_cli(*args, env=wait)
            assert result.returncode == 1, (args, result.stderr)
            assert result.stderr == f"seelen: {holder}{advice}\n", args
        out, err = chat.communicate("still there?\n", timeout=60)
    finally:
        if chat.poll() is None:
            chat.kill()
    assert chat.returncode == 0 and "answer to still there?" in out, err
