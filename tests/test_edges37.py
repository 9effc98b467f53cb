"""What a demanding user met in the commands around memory: labels said once, files read
without opening the whole memory, backups without SQLite's side files, failures that leave
nothing behind, listings that page, one JSON shape, one tokenizer."""

from __future__ import annotations

from pathlib import Path

from helpers import open_store, run_cli


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
