"""A chat's first line does not wait for the embedder and LanceDB to load."""

from __future__ import annotations

import asyncio
from pathlib import Path

from seelen.memory.indexer import Indexer
from seelen.memory.recall import Recall
from seelen.models.embed import LocalEmbedder
from seelen.store import Store
from seelen.vectors import VectorIndex


async def test_recall_uses_keywords_while_vectors_warm_up_then_both(tmp_path: Path) -> None:
    store = Store(tmp_path / "chat.db")
    index = VectorIndex(tmp_path / "lancedb", LocalEmbedder().model_id, LocalEmbedder().dim)
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", "my sister moved to Lisbon last spring", None, 1_000)])
    store.mark_archived(sid)
    Indexer(store, index, LocalEmbedder()).index_all()
    current = store.create_session().session_id

    cold = LocalEmbedder()  # as in a fresh process: the model is not loaded yet
    recall = Recall(store, VectorIndex(tmp_path / "lancedb", cold.model_id, cold.dim), cold)
    recall.wait_for_warm = False
    cold._lock.acquire()  # the warm-up is still loading the model
    try:
        recall.warm(current)
        first = await asyncio.wait_for(
            asyncio.to_thread(recall.search, "where does my sister live? Lisbon", current), 5
        )
    finally:
        cold._lock.release()
    assert [t.text for t in first.turns] == ["my sister moved to Lisbon last spring"]
    # No vector search: it would have waited. (Its session, ranked as a whole, adds a list by
    # words: "bm25_in_whole".)
    assert first.turns[0].sources.keys() == {"bm25", "bm25_in_whole"}

    assert recall._warming is not None
    await asyncio.to_thread(recall._warming.result, 30)
    warm = recall.search("where does my sister live? Lisbon", current)
    assert {"bm25", "vector"} <= set(warm.turns[0].sources)
    recall.close()
    store.close()
