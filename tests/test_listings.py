"""What listings print into a pipe, knowledge folders told apart by real path, and what
Ctrl-C of an answer given in this process says."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import active_texts, ask_stopped, open_store, run_cli
from model_server import ModelServer, Reply


def _padded(text: str) -> list[str]:
    return [line for line in text.splitlines() if line != line.rstrip()]


def test_listings_in_a_pipe_end_their_lines_without_padding(
    env: ModelServer, data_dir: Path
) -> None:
    """`memory search` (its table, and the stacked hits of a narrow terminal), `sessions
    list` and a piped chat's /help padded every line with spaces to the width of the table."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", "My sister moved to Lisbon last spring", None, 1_000)])
    store.add_turns(sid, [("assistant", "Lisbon has trams and a wide river", None, 2_000)])
    store.add_summary(sid, "We talked about Lisbon: " + "the trams, the river, " * 8, 1, 2)
    store.mark_archived(sid)
    store.close()
    for columns in ("80", "40"):
        found = run_cli("memory", "search", "Lisbon", env={"COLUMNS": columns})
        assert found.returncode == 0 and "Lisbon" in found.stdout, found.stderr
        assert _padded(found.stdout) == [], columns
        listed = run_cli("sessions", "list", env={"COLUMNS": columns}).stdout
        assert "the trams" in listed and _padded(listed) == [], columns
    helped = run_cli("chat", stdin="/help\n", env={"COLUMNS": "60"})
    assert "/memory" in helped.stdout and _padded(helped.stdout) == []


def test_knowledge_search_ranks_passages_without_a_score_that_says_nothing(
    tmp_path: Path, data_dir: Path
) -> None:
    """In a folder of one note BM25 scores every match 0: the search printed "0.00" before
    each passage. Each passage now has its rank; a file's name is shown as data."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.md").write_text("The garden hose is in the blue shed.\n", "utf-8")
    (notes / "odd\x1b[31mname.md").write_text("The garden gnome sits by the pond.\n", "utf-8")
    assert run_cli("knowledge", "add", str(notes)).returncode == 0
    found = run_cli("knowledge", "search", "garden hose").stdout.splitlines()
    assert found[0].split() == ["1", "notes/garden.md"]
    assert found[1].strip() == "The garden hose is in the blue shed."
    assert "0.00" not in "\n".join(found)
    gnome = run_cli("knowledge", "search", "gnome").stdout
    assert "\x1b" not in gnome and "odd␛[31mname.md" in gnome


def test_knowledge_list_add_and_remove_know_a_folder_by_its_real_path(
    tmp_path: Path, data_dir: Path
) -> None:
    """`knowledge list` told folders apart by spelling: a folder named through a link in
    KNOWLEDGE_DIRS and by its path in the profile showed twice, the second "missing"; and
    `add` through a link added the folder a second time."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("The spare key is under the mat.\n", "utf-8")
    link = tmp_path / "link"
    link.symlink_to(notes)
    assert run_cli("knowledge", "add", str(notes)).returncode == 0
    listed = run_cli("knowledge", "list", env={"KNOWLEDGE_DIRS": str(link)}).stdout
    assert listed == f"{link}  (KNOWLEDGE_DIRS, 1 note indexed)\n"
    again = run_cli("knowledge", "add", str(link))
    assert (again.returncode, again.stdout) == (0, f"already read: {notes}\n")
    folders = json.loads((data_dir / "default" / "knowledge_folders.json").read_text("utf-8"))
    assert folders == {"folders": [str(notes)]}
    assert run_cli("knowledge", "remove", str(link)).returncode == 0
    assert "no knowledge folder" in run_cli("knowledge", "list").stdout


def test_ctrl_c_of_an_answer_in_this_process_says_the_question_is_kept(
    env: ModelServer, data_dir: Path
) -> None:
    """With SEELEN_OWNER=false, Ctrl-C ended `ask` with exit 130 and not a word: the user
    could not know that the question and the words so far were kept for /retry."""
    env.responder = lambda body: Reply(text="one two three four five six", chunk_delay=0.5)
    code, out, err = ask_stopped("a slow one")
    assert code == 130 and out.startswith(b"one")
    assert err.decode() == (
        "seelen: stopped; your question is saved (with the answer so far): "
        "`seelen chat` and /retry answer it\n"
    )
    assert out.decode().endswith("\n")  # the words so far end their line
    texts = active_texts(data_dir)
    assert texts[0] == "a slow one" and texts[1].startswith("one")


def test_the_first_mcp_token_makes_a_private_data_dir(data_dir: Path) -> None:
    """`seelen mcp token` on a new data dir made it 0755 (only the profile's folder was 0700):
    whoever came next could list which profiles exist."""
    import os
    import stat

    os.umask(0o022)
    made = run_cli("mcp", "token")
    assert made.returncode == 0, made.stderr
    for folder in (data_dir, data_dir / "default"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    token = data_dir / "default" / "mcp_token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert made.stdout.strip() == token.read_text("ascii").strip()
