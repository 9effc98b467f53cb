"""The search among the turns of the one speaker a question names (a transcript's speaker),
on a real Store, a real LanceDB index and the local model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from seelen.memory.indexer import Indexer
from seelen.memory.names import common_names
from seelen.memory.recall import Recall
from seelen.memory.speakers import named_speaker, spoken_by
from seelen.models.embed import LocalEmbedder, embed_query
from seelen.store import Store
from seelen.vectors import VectorIndex

T0 = 1_736_150_400_000  # 2025-01-06
DAY_MS = 86_400_000
ANSWER = "Dave: Nice one, Calvin. Fixing up old engines in my garage is what I love most."
# Calvin's turns match "What is Dave's main passion?" better by meaning and by words than
# Dave's answer, which shares no word with it but the name: the direct searches, three deep,
# are full of them.
SESSIONS = [
    ["Calvin: Music is my main passion, I could play guitar all day.", ANSWER],
    ["Calvin: My real passion is songwriting, Dave.", "Dave: Sounds good, see you Monday."],
    ["Calvin: Singing is the passion of my life.", "Dave: The weather was cold today."],
    ["Calvin: Touring is my passion, Dave, the crowds are everything.", "Dave: Okay, Calvin."],
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def transcript(tmp_path: Path, embedder: LocalEmbedder) -> Iterator[tuple[Store, VectorIndex]]:
    store = Store(tmp_path / "chat.db")
    index = VectorIndex(tmp_path / "lancedb", embedder.model_id, embedder.dim)
    for day, turns in enumerate(SESSIONS, start=1):
        start = T0 + day * DAY_MS
        sid = store.create_session(status="active", start_ms=start).session_id
        said = [("user" if t.startswith("Calvin") else "assistant", t) for t in turns]
        store.add_turns(sid, [(r, t, None, start + i * 60_000) for i, (r, t) in enumerate(said)])
        store.mark_archived(sid)
    Indexer(store, index, embedder).index_all()
    yield store, index
    store.close()


def test_the_named_speaker_is_the_one_name_most_turns_hold(
    transcript: tuple[Store, VectorIndex],
) -> None:
    store, _ = transcript

    def speaker(question: str) -> str | None:
        return named_speaker(common_names(store, question))

    assert speaker("What is Dave's main passion?") == "Dave"
    assert speaker("What do Dave and Calvin share?") is None  # both speakers
    assert speaker("Where is Glacier park?") is None  # names held by no turn
    assert speaker("what does dave love?") is None  # not written as a name


def test_the_speakers_search_keeps_only_what_that_speaker_said(
    transcript: tuple[Store, VectorIndex], embedder: LocalEmbedder
) -> None:
    store, index = transcript
    vector = embed_query(embedder, "What is main passion?")
    hits = spoken_by(store, index, vector, "Dave", 2, None)
    texts = store.get_turns(h.text_id for h in hits)
    assert len(hits) == 2 and all(texts[h.text_id].text.startswith("Dave:") for h in hits)
    assert texts[hits[0].text_id].text == ANSWER  # the closest of Dave's turns first
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert np.isclose(hits[0].score, float(np.dot(hits[0].vector, vector)), atol=1e-4)


def test_a_speakers_answer_no_direct_search_finds_joins_the_ranking(
    transcript: tuple[Store, VectorIndex], embedder: LocalEmbedder
) -> None:
    store, index = transcript
    current = store.create_session(start_ms=T0 + 40 * DAY_MS).session_id
    recall = Recall(store, index, embedder, candidates=3)
    recall.best_sessions = recall.whole_sessions = 0  # only the speaker's search can find it
    question = "What is Dave's main passion?"
    turns = {t.text: t for t in recall.search(question, current, conv_num=10).turns}
    assert ANSWER in turns and turns[ANSWER].sources.keys() == {"vector_speaker"}
    recall.speaker = False
    assert ANSWER not in {t.text for t in recall.search(question, current, conv_num=10).turns}
