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


def test_a_piped_chat_on_a_full_disk_fails_naming_the_lines_not_kept(
    env: ModelServer, data_dir: Path
) -> None:
    import resource
    import signal
    import subprocess
    import sys

    def small_files() -> None:  # a file may not grow past 2 MB: as a disk that is full
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))

    big = "x" * 3_000_000
    result = subprocess.run(
        [sys.executable, "-m", "seelen", "chat"],
        input=f"hello\n{big}\nbye\n",
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=120,
    )
    assert result.returncode == 1
    assert "error" not in result.stdout  # stdout holds the replies only
    errors = result.stderr.splitlines()
    assert len(errors) == 2, result.stderr
    assert (
        errors[0].startswith("error: cannot read or write")
        and "a full or failing disk" in errors[0]
    )
    assert errors[1] == "seelen: of 3 input lines: 1 message not kept (line 2); each error is above"
    store = open_store(data_dir)
    kept = [t.text for t in store.turns(store.active_session().session_id) if t.role == "user"]
    assert kept == ["hello", "bye"]
    store.close()


async def test_closing_says_first_what_it_waits_for(data_dir: Path) -> None:
    import threading

    import numpy as np

    from seelen.app import build_app
    from seelen.config import load_settings

    app = build_app(load_settings(), with_model=False)
    assert app.index is not None
    real, gate, embedding = app.index.embedder, threading.Event(), threading.Event()

    class HeldEmbedder:  # the real model, held at a gate while it embeds a batch
        model_id, dim = real.model_id, real.dim

        def embed(self, texts: list[str]) -> np.ndarray:
            embedding.set()
            gate.wait(10)
            return real.embed(texts)

    app.index.embedder = HeldEmbedder()
    sid = app.store.create_session().session_id
    app.store.add_turns(sid, [("user", "my sister moved to Lisbon", None, 1)])
    said: list[str] = []
    app.closing = said.append
    app.start_background()
    assert embedding.wait(10) and app.index.working()
    threading.Timer(0.3, gate.set).start()  # the batch ends while closing waits for it
    await app.aclose()
    assert said == ["finishing the vector index's current batch…"]
    assert not app.index.working()
