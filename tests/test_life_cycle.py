"""A profile's memory over months, as a user meets it: a damaged file, forgetting, importing
a Markdown export by mistake. Each fault is one line that says what to do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import open_store, run_cli


def _truncated_profile(data_dir: Path) -> Path:
    """A profile whose chat_sessions.db lost its second half (a disk fault, a bad copy)."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    session = store.create_session("archived")
    store.add_turns(session.session_id, [("user", f"note {n} " * 40, None, n) for n in range(200)])
    store.close()
    db = data_dir / "default" / "chat_sessions.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for journal in ("-wal", "-shm"):
        db.with_name(db.name + journal).unlink(missing_ok=True)
    with db.open("r+b") as file:
        file.truncate(db.stat().st_size // 2)
    return db


def test_a_damaged_database_sends_the_user_to_restore_not_round_to_repair(
    data_dir: Path,
) -> None:
    db = _truncated_profile(data_dir)
    size = db.stat().st_size
    check = run_cli("db", "check")
    assert check.returncode == 1 and "FAIL SQLite integrity" in check.stdout
    assert "repair` fixes" not in check.stderr
    assert "no backup to restore: copy" in check.stderr  # none was made: restore has nothing
    repair = run_cli("db", "repair")
    assert repair.returncode == 1
    [line] = repair.stderr.splitlines()
    assert line.startswith("seelen: ") and "damaged" in line
    assert "`seelen db restore`" in line and "run `seelen db repair`" not in line
    assert db.stat().st_size == size  # nothing written to it


def _profile_bytes(data_dir: Path) -> bytes:
    folder = data_dir / "default"
    return b"".join(p.read_bytes() for p in folder.glob("chat_sessions.db*") if p.is_file())


def test_a_forgotten_text_is_gone_from_the_file_not_only_from_search(data_dir: Path) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    kept = store.create_session("archived")
    store.add_turns(kept.session_id, [("user", f"kept words {n}", None, n) for n in range(50)])
    store.add_summary(kept.session_id, "about kept words", 0, 50)
    gone = store.create_session("archived")
    secret = store.add_turn(gone.session_id, "user", "my locker code is quokka7781")
    store.add_summary(gone.session_id, "the locker code, quokka7781", 0, 1)
    store.close()
    assert b"quokka7781" in _profile_bytes(data_dir)
    forgot = run_cli("memory", "forget", secret.text_id[:8])
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout == f"Forgot {secret.text_id} (1 text).\n"
    whole = run_cli("memory", "forget", "--session", gone.session_id[:8])  # its summary too
    assert whole.stdout == f"Forgot session {gone.session_id} (1 text).\n"  # not the prefix
    assert b"quokka7781" not in _profile_bytes(data_dir)
    assert "kept words 7" in run_cli("export").stdout  # the rest stays


def test_forget_help_says_what_it_keeps() -> None:
    said = " ".join(run_cli("memory", "forget", "--help").stdout.split())
    for kept in ("user_profile.txt", "`seelen profile edit`", "Backups", "asks nothing"):
        assert kept in said


def test_the_help_tells_profiles_the_memories_from_profile_the_file() -> None:
    said = run_cli("--help").stdout
    assert "--profile <str>   which memory to use (`seelen profiles` lists them)" in said
    assert "profiles   List the memories (profiles)" in said
    about_you = " ".join(run_cli("profile", "--help").stdout.split())
    assert "Not --profile: that picks a memory." in about_you


def test_importing_the_markdown_export_or_an_empty_file_says_what_it_is(tmp_path: Path) -> None:
    markdown = tmp_path / "memory.md"
    assert run_cli("export", "-f", "markdown", "-o", str(markdown)).returncode == 0
    sections = markdown.read_text().split("## ")  # an empty memory's sections say so
    assert sections[1:] == ["Persona\n\n(empty)\n\n", "User profile\n\n(empty)\n\n"]
    for source, stdin, says in (
        (str(markdown), "", "this is a Markdown export, written for reading"),
        ("-", markdown.read_text(), "this is a Markdown export, written for reading"),
        ("-", "\n", "the file is empty: nothing to import"),
    ):
        result = run_cli("import", source, stdin=stdin)
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"seelen: import: {says}")
