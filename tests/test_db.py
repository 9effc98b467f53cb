"""`seelen db check|repair|optimize|backup|restore|stats` and `doctor`'s vector counts, on
a real profile: SQLite, LanceDB and the local embedding model in a temporary data dir."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

from seelen.app import App, build_app
from seelen.config import load_settings
from seelen.memory import maintenance
from seelen.store.schema import index_text
from seelen.vectors import VectorRow

WORDS = "tea harbour violin lisbon cactus kayak ramen comet lantern pebble".split()


def fill(app: App, sessions: int = 2, turns: int = 6) -> None:
    for s in range(sessions):
        session = app.store.create_session("archived")
        rows = [
            ("user" if t % 2 == 0 else "assistant", f"{WORDS[(s + t) % 10]} {s}-{t}", None, t)
            for t in range(turns)
        ]
        app.store.add_turns(session.session_id, rows)
        app.store.add_summary(session.session_id, f"about {WORDS[s]}", 0, turns)
    app.index.index_all()


@pytest.fixture
def memory(data_dir: Path) -> Iterator[App]:
    app = build_app(load_settings(), with_model=False)
    fill(app)
    yield app
    import asyncio

    asyncio.run(app.aclose())


def failed(app: App) -> dict[str, str]:
    return {f.name: f.detail for f in maintenance.check(app) if not f.ok}


def test_check_finds_drift_and_repair_fixes_it_without_losing_a_word(memory: App) -> None:
    assert failed(memory) == {}
    turn_ids = list(memory.store.index_flags("turns"))
    memory.recall.index.delete("turns", text_ids=turn_ids[:3])
    memory.recall.index.add("turns", [VectorRow("ghost", "s", 0, np.ones(384))])
    db = sqlite3.connect(memory.settings.profile_dir / "chat_sessions.db")
    db.create_function("seelen_words", 1, index_text)  # what the word-index triggers call
    db.execute(
        "INSERT INTO conversation (text_id, session_id, timestamp, role, text) "
        "VALUES ('lost', 'gone-session', 5, 'user', 'words of a lost session')"
    )
    db.commit()
    db.close()
    problems = failed(memory)
    assert problems["SQLite foreign keys"] == "1 row points at a missing session"
    assert "3 indexed texts without a vector" in problems["vectors of turns"]
    assert "1 vector without a text" in problems["vectors of turns"]
    assert "1 waiting to be indexed" in problems["vectors of turns"]  # the orphaned turn
    done = maintenance.repair(memory)
    assert not [line for line in done if line.startswith("still wrong")], done
    assert failed(memory) == {}
    assert memory.store.get_turns(["lost"])["lost"].text == "words of a lost session"


def test_db_commands_exit_1_on_a_damaged_index_until_repaired(memory: App) -> None:
    assert run_cli("db", "check").returncode == 0
    for data in (memory.settings.profile_dir / "lancedb").glob("*.lance/data/*"):
        data.write_bytes(b"garbage" * 9)
    bad = run_cli("db", "check")
    assert bad.returncode == 1 and "FAIL vector index readable" in bad.stdout
    fixed = run_cli("db", "repair")
    assert fixed.returncode == 0, fixed.stderr
    assert "moved it to" in fixed.stdout and "indexed 14 texts" in fixed.stdout
    assert run_cli("db", "check").returncode == 0
    stats = run_cli("db", "stats").stdout
    assert "vectors of turns       12" in stats and "damaged indexes kept   1" in stats


async def test_doctor_counts_vectors_against_texts(env, memory: App) -> None:
    from seelen.cli.doctor import run_checks

    app = build_app(load_settings())
    shutil.rmtree(app.settings.profile_dir / "lancedb")
    env.enqueue("ready")
    checks = {c.name: c for c in await run_checks(app)}
    index = checks["vector index"]
    assert not index.ok and "12 indexed texts without a vector" in index.detail
    await app.aclose()


def modes(path: Path) -> set[int]:
    return {stat.S_IMODE(p.stat().st_mode) for p in [path, *path.rglob("*")]}


def test_backup_and_restore_round_trip(memory: App) -> None:
    profile = memory.settings.profile_dir
    umask = os.umask(0o022)  # a common umask that would leave files readable by all
    try:
        first = maintenance.backup(profile, keep=3)
    finally:
        os.umask(umask)
    assert first.parent == profile / "backups" and modes(first) == {0o700, 0o600}
    session = memory.store.create_session()
    memory.store.add_turn(session.session_id, "user", "said after the backup")
    memory.files.write("persona_memory.txt", "a changed persona")
    source, saved = maintenance.restore(profile, "1", keep=3)
    assert source == first and "before-restore" in saved.name
    from seelen.store import Store

    restored = Store(profile / "chat_sessions.db")
    assert restored.count_turns() == 12 and restored.find_text_ids("") != []
    assert "changed" not in (profile / "persona_memory.txt").read_text()
    kept = Store(saved / "chat_sessions.db")  # what was there is a backup now
    assert kept.count_turns() == 13
    assert (saved / "persona_memory.txt").read_text().strip() == "a changed persona"
    restored.close()
    kept.close()


def test_backups_rotate_and_restore_by_name(memory: App) -> None:
    profile = memory.settings.profile_dir
    made = [maintenance.backup(profile, keep=2) for _ in range(3)]
    assert maintenance.backups(profile) == made[:0:-1]  # the oldest went
    assert maintenance.find_backup(profile, made[1].name) == made[1]
    for which in ("5", "0"):  # "there are 2 backups, not 0" said nothing of where they start
        with pytest.raises(Exception, match=rf"no backup {which}: .* 1 \(the newest\) to 2"):
            maintenance.find_backup(profile, which)
    with pytest.raises(Exception, match="no backup is named 'nonesuch'"):
        maintenance.find_backup(profile, "nonesuch")


def test_a_backup_taken_during_writes_is_consistent(memory: App) -> None:
    from seelen.store import Store

    profile = memory.settings.profile_dir
    writer = Store(profile / "chat_sessions.db")
    session = writer.create_session()
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            writer.add_turn(session.session_id, "user", "typing while backing up")

    thread = threading.Thread(target=write)
    thread.start()
    try:
        copy = maintenance.backup(profile, keep=3)
    finally:
        stop.set()
        thread.join()
    with sqlite3.connect(copy / "chat_sessions.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        n = db.execute("SELECT count(*) FROM conversation").fetchone()[0]
    assert 12 <= n <= writer.count_turns()
    writer.close()


def test_optimize_keeps_every_text_and_vector(memory: App) -> None:
    lines = maintenance.optimize(memory)
    assert any(line.startswith("chat_sessions.db:") for line in lines)
    assert failed(memory) == {}
    assert memory.recall.search("lisbon", None).turns


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_restore_recovers_a_damaged_or_lost_database(memory: App, damage: str) -> None:
    from seelen.store import Store

    profile = memory.settings.profile_dir
    good = maintenance.backup(profile, keep=3)
    memory.store.close()
    db = profile / "chat_sessions.db"
    for journal in ("-wal", "-shm"):
        (profile / f"chat_sessions.db{journal}").unlink(missing_ok=True)
    if damage == "garbage":
        db.write_bytes(b"\x00garbage" * 512)
    else:
        db.unlink()
    bad = run_cli("db", "check")
    assert bad.returncode == 1 and "FAIL SQLite integrity" in bad.stdout
    restored = run_cli("db", "restore")
    assert restored.returncode == 0, restored.stderr
    assert good.name in restored.stdout
    again = Store(db)
    assert again.count_turns() == 12
    again.close()
    saved = [p for p in maintenance.backups(profile) if "before-restore" in p.name]
    if damage == "garbage":  # the damaged file is kept, byte for byte
        assert (saved[0] / "chat_sessions.db").read_bytes() == b"\x00garbage" * 512
    assert run_cli("db", "check").returncode == 0
