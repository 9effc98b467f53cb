"""A chat whose input ends, or whose start fails, exits: no thread is left waiting behind it."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from helpers import open_store, run_seelen
from model_server import ModelServer

from seelen.memory.recall import Recall
from seelen.models.embed import LocalEmbedder
from seelen.vectors import VectorIndex


def archived_history(data_dir: Path) -> None:
    """One archived session, so that opening the profile warms recall up in the background."""
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", "my sister moved to Lisbon", None, 1_000)])
    store.mark_archived(sid)
    store.close()


def test_a_warm_up_whose_start_was_cancelled_ends(tmp_path: Path) -> None:
    from seelen.store import Store

    store = Store(tmp_path / "chat.db")
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", "a past line", None, 1_000)])
    store.mark_archived(sid)
    embedder = LocalEmbedder()
    recall = Recall(
        store, VectorIndex(tmp_path / "lancedb", embedder.model_id, embedder.dim), embedder
    )
    model_ready: Future[None] = Future()
    recall.warm("another session", after=model_ready)
    model_ready.cancel()  # what closing the app does when the chat ends before the import
    assert recall._warming is not None
    recall._warming.exception(timeout=10)  # finished (before: waited forever)
    recall.close()
    store.close()


def test_a_piped_chat_with_no_input_exits(env: ModelServer, data_dir: Path) -> None:
    # Blank lines, `/retry` with nothing to retry and a failed start ended the same way: the
    # interpreter's exit joined recall's warm-up thread, which waited for ever.
    archived_history(data_dir)
    result = run_seelen("chat", stdin="", timeout=40)
    assert result.returncode == 0, result.stderr
