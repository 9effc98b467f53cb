"""One writer per profile, enforced: readers change nothing; opening closes what it opened.

A reader (search, lists, export, checks, the read-only Python API) opens the memory
read-only while another process holds the profile: not one byte of the vector store may
change, and the reader still answers (texts not yet indexed by their words). Only the
lock's holder indexes. A step of start-up that fails closes what the steps before it opened.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli, wait_until

from seelen.api import Memory
from seelen.app import NotWriter, build_app
from seelen.client.procs import children
from seelen.config import Settings, load_settings
from seelen.errors import ConfigError, SeelenError
from seelen.runtime import ProfileBusy, ProfileLock, open_memory
from seelen.vectors import VectorRow

# Another process that holds the profile's writer lock until its stdin closes, as a chat
# in another terminal does.
HOLDER = """
import sys
from pathlib import Path
from seelen.runtime import ProfileLock
lock = ProfileLock(Path(sys.argv[1]), sys.argv[2])
lock.acquire(wait=False)
sys.stdin.read()
"""


def hold(profile: Path, role: str = "chat") -> subprocess.Popen[bytes]:
    """Another process holding `profile`'s writer lock as `role` (until its stdin closes)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(profile), role], stdin=subprocess.PIPE
    )
    wait_until(
        lambda: f"pid {holder.pid}" in ProfileLock(profile, "").holder(),
        30,
        "the other process holds the profile",
    )
    return holder


def fill(settings: Settings) -> None:
    """Two archived sessions: the first indexed (plus a vector whose text is gone, which a
    repair would drop), the second not indexed yet."""
    app = open_memory(settings, role="test", step_aside=False)
    first = app.store.create_session("archived")
    app.store.add_turns(
        first.session_id,
        [
            ("user", "My sister Ingrid keeps bees in Uppsala", None, None),
            ("assistant", "Bees in Uppsala, how lovely.", None, None),
        ],
    )
    assert app.index_pending() == 2
    assert app.recall is not None
    index = app.recall.index
    orphan = np.full(index.dim, 1 / np.sqrt(index.dim), dtype=np.float32)
    index.add("turns", [VectorRow("orphan-of-a-deleted-text", first.session_id, 0, orphan)])
    later = app.store.create_session("archived")
    app.store.add_turn(later.session_id, "user", "The marmalade needs Seville oranges")
    asyncio.run(app.aclose())


def snapshot(profile: Path) -> dict[str, str]:
    """Every file of the vector store, the memory database and the two memory files, by
    the hash of its bytes."""
    files = [p for p in (profile / "lancedb").rglob("*") if p.is_file()]
    files += [profile / name for name in ("chat_sessions.db", "persona_memory.txt")]
    return {str(p.relative_to(profile)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def entries(profile: Path) -> list[str]:
    """What the profile folder holds, but SQLite's own -wal/-shm (readers share those)."""
    return sorted(p.name for p in profile.iterdir() if not p.name.endswith(("-wal", "-shm")))


def test_a_reader_changes_no_byte_while_a_writer_holds_the_profile(data_dir: Path) -> None:
    settings = load_settings({"TIMEZONE": "UTC"})
    profile = settings.profile_dir
    fill(settings)
    holder = hold(profile)
    try:
        before, listed = snapshot(profile), entries(profile)

        found = run_cli("memory", "search", "--json", "my sister Ingrid's bees")
        assert found.returncode == 0, found.stderr
        top = json.loads(found.stdout)["turns"][0]
        assert "Ingrid" in top["text"] and "vector" in top["rankers"]  # found by meaning
        # The text the writer has not indexed yet is found by its words, and that is said.
        assert found.stderr.count("1 newer text is not in the vector index yet") == 1
        waiting = run_cli("memory", "search", "--json", "Seville marmalade")
        item = json.loads(waiting.stdout)["turns"][0]
        assert "Seville" in item["text"] and item["rankers"]["bm25"] == 1
        assert not [name for name in item["rankers"] if name.startswith("vector")]  # words only

        for args in (["memory", "search", "bees"], ["sessions", "list"], ["export"]):
            result = run_cli(*args)
            assert result.returncode == 0, (args, result.stderr)
        stats = run_cli("db", "stats")
        assert "waiting to be indexed  1" in stats.stdout
        check = run_cli("db", "check")  # it reports the orphan, repairs nothing
        assert check.returncode == 1 and "1 vector without a text" in check.stdout

        with Memory.open(data_dir, "default", read_only=True) as memory:
            with pytest.warns(UserWarning, match="not in the vector index yet"):
                hits = memory.recall("Seville oranges", limit=1)
            assert "Seville" in hits["turns"][0]["text"]
        with pytest.raises(ProfileBusy, match=r"the Seelen chat in another terminal \(pid"):
            Memory.open(data_dir, "default")  # a writer, and the profile is taken

        assert snapshot(profile) == before and entries(profile) == listed
        assert holder.poll() is None  # the writer held the profile all along
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)

    # With nobody holding the profile, a search indexes first (and the repair runs).
    after = run_cli("memory", "search", "--json", "Seville marmalade")
    assert "vector" in json.loads(after.stdout)["turns"][0]["rankers"]
    assert "not in the vector index" not in after.stderr
    assert snapshot(profile) != before


def test_only_the_lock_holder_indexes_and_memory_alone_builds_no_model(data_dir: Path) -> None:
    settings = load_settings()
    app = build_app(settings, with_model=False)
    try:
        assert app.chat_model is None and app.chatbot is None and app.tools is None
        with pytest.raises(SeelenError, match="without a chat model"):
            app.bot.turn("hello")
        app.store.add_turn(app.store.create_session().session_id, "user", "hello there")
        with pytest.raises(NotWriter):
            app.index_pending()
        lock = ProfileLock(settings.profile_dir, "test")
        lock.acquire(wait=False)
        app.lock = lock
        assert app.index_pending() == 1 and app.index_pending() == 0
        lock.release()
        with pytest.raises(NotWriter):
            app.index_pending()
    finally:
        asyncio.run(app.aclose())


def test_readers_of_a_missing_profile_create_nothing(data_dir: Path) -> None:
    for args in (
        ["sessions", "list"],
        ["memory", "search", "anything"],
        ["memory", "search", "--json", "anything"],
        ["export"],
        ["persona", "show"],
    ):
        result = run_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
    stats = run_cli("db", "stats")
    assert stats.returncode == 1 and "no memory at" in stats.stderr
    assert not data_dir.exists()


def test_a_step_failing_after_the_local_model_started_closes_what_was_opened(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    monkeypatch.setenv("LLM_PROVIDER", "local")
    # Refused while the recall parts are built: after the model server and the store opened.
    # (load_settings refuses this pair before anything starts; Settings built past it do not.)
    settings = dataclasses.replace(load_settings(), embedding_provider="openai")
    lines: list[str] = []
    before = children(os.getpid())
    with pytest.raises(ConfigError, match="EMBEDDING_MODEL") as caught:
        build_app(settings, progress=lines.append)
    assert any("loading model" in line for line in lines)  # the local server had started
    assert children(os.getpid()) == before  # and its process is gone
    profile = data_dir / "default"
    assert (profile / "chat_sessions.db").is_file()  # the store had been opened
    # and closed: SQLite removes the WAL when the last connection closes. (The traceback,
    # still alive here, would keep an unclosed store open.)
    assert caught.traceback and not (profile / "chat_sessions.db-wal").exists()


def test_a_writer_command_waits_for_the_profile_only_so_long(data_dir: Path) -> None:
    settings = load_settings({"TIMEZONE": "UTC"})
    fill(settings)
    profile = settings.profile_dir
    holder = hold(profile, "import")  # work that ends soon is waited for (a chat is not)
    try:
        result = run_cli("memory", "reindex", env={"SEELEN_WAIT_SECONDS": "0.5"})
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"waiting for another `seelen import` (pid {holder.pid}) to finish with this profile…",
            f"seelen: another `seelen import` (pid {holder.pid}) is still using this "
            "profile after 0.5 s (SEELEN_WAIT_SECONDS): try again when it is done",
        ]
    finally:
        holder.communicate(b"")
