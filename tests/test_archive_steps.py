"""Each archive step is kept together with its record, so a crash or a failed write between
them cannot make the next start do it again (a second summary, a second profile rewrite)."""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import pytest
from model_server import ModelServer
from test_memory import jobs, open_app, say, scripted
from test_trust_archive import LOOP

from seelen.memory.persona import PROFILE
from seelen.memory.prompts import QUOTE_CLOSE, QUOTE_OPEN
from seelen.store import ARCHIVED


def wal_commits(db: Path) -> list[dict[int, bytes]]:
    """The transactions in `db`'s write-ahead log, oldest first, as the file holds them: each
    one the pages it wrote (page number → page image)."""
    data = db.with_name(db.name + "-wal").read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts, frame = data[16:24], 24 + page_size
    commits: list[dict[int, bytes]] = []
    pending: dict[int, bytes] = {}
    for offset in range(32, len(data) - frame + 1, frame):
        if data[offset + 8 : offset + 16] != salts:
            break  # frames of an earlier generation of the log
        page, size_after = struct.unpack(">II", data[offset : offset + 8])
        pending[page] = data[offset + 24 : offset + frame]
        if size_after:  # a commit frame ends its transaction
            commits.append(pending)
            pending = {}
    return commits


def first_commit(db: Path, table: str, needle: str) -> int:
    """The first transaction that wrote `needle` into `table` (a table of one page here)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    found = (i for i, c in enumerate(wal_commits(db)) if needle.encode() in c.get(root, b""))
    return next(found, -1)


async def test_the_summary_and_the_tidied_turns_are_committed_with_their_steps(
    env: ModelServer,
) -> None:
    summary = "Ada keeps bees on her balcony in Lyon."
    env.responder = scripted(
        {
            "summary": summary,
            "profile": "Keeps bees",
            "persona": "I am Seelen.",
            "chat": f"You said {QUOTE_OPEN}my bees are calm{QUOTE_CLOSE}, lovely.",
        }
    )
    app = await open_app()
    await say(app, "My bees are calm")
    await app.sessions.archive()
    db = app.store.path
    # One commit holds the summary and its step (whose payload is the summary), so no crash
    # can leave a summary that the next start would add again.
    written = first_commit(db, "summary", summary)
    assert written >= 0 and first_commit(db, "archive_step", summary) == written
    tidied = first_commit(db, "conversation", "You said my bees are calm, lovely.")
    assert tidied >= 0 and first_commit(db, "archive_step", "strip_quotes") == tidied
    # And the session's archived status with the last step, so the two never disagree.
    closed = first_commit(db, "session", ARCHIVED)
    assert closed >= 0 and first_commit(db, "archive_step", "archived") == closed
    await app.aclose()


async def test_a_rewrite_that_could_not_be_written_is_not_asked_for_again(
    env: ModelServer,
) -> None:
    env.responder = scripted(
        {"summary": "Ada keeps bees.", "profile": "Keeps bees in Lyon", "persona": LOOP}
    )
    app = await open_app()
    await say(app, "I keep bees in Lyon")
    session = app.sessions.current
    app.files.write(PROFILE, "Lives in Lyon.")
    before = app.files.read(PROFILE)
    history = app.files.history
    shutil.rmtree(history, ignore_errors=True)
    history.write_text("in the way")  # the old version cannot be kept: the file stays
    with pytest.raises(OSError):
        await app.sessions.archive()
    assert app.files.read(PROFILE) == before
    history.unlink()
    await app.sessions.finish_archive(session)  # what the next start does
    assert jobs(env).count("profile") == 1  # the model's rewrite was kept, not asked again
    assert app.files.read(PROFILE) == "Keeps bees in Lyon\n"
    assert [p.read_text() for p in app.files.versions(PROFILE)] == [before]
    assert "Keeps bees" not in app.store.archive_steps(session.session_id)[PROFILE]
    await app.aclose()
