"""EMBEDDING_PROVIDER=auto: the fast English model until the user writes another language."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seelen.api import Memory
from seelen.app import embedding_provider
from seelen.config import load_settings
from seelen.models.embed import E5Embedder, LocalEmbedder
from seelen.models.languages import MIN_OTHER, needs_multilingual, reads_as_english
from seelen.store import Store
from seelen.vectors.meta import META_FILE, ModelRecord

ENGLISH = [
    "I made risotto tonight with saffron.",
    "Work was hectic today, the fire alarm went off.",
    "Sore calves again, maybe I should start going for short walks.",
    "Yes, in Lisbon!",
    "Henrik's bike got stolen outside the station again.",
]
OTHER = [
    "我的猫叫小花，她最喜欢吃金枪鱼。",
    "Ich habe heute mit meiner Schwester in Berlin gesprochen, sie wohnt jetzt dort.",
    "Hoy he comido paella con mis amigos en la playa, fue genial.",
    "Je suis allé au marché ce matin avec ma mère pour acheter des légumes.",
    "Мой кот любит рыбу.",
]


@pytest.mark.parametrize("text", ENGLISH)
def test_english_chat_reads_as_english(text: str) -> None:
    assert reads_as_english(text)


@pytest.mark.parametrize("text", OTHER)
def test_other_languages_and_scripts_do_not(text: str) -> None:
    assert not reads_as_english(text)


def test_a_memory_needs_the_multilingual_model_only_when_the_user_writes_another_language() -> None:
    english = ENGLISH * 20
    assert not needs_multilingual(english)
    # One quoted name in another script is not a language the user writes in.
    assert not needs_multilingual([*english, "我们去了“海底捞”吃火锅"])
    assert needs_multilingual([*english, *OTHER[:MIN_OTHER]])
    assert needs_multilingual(OTHER[:MIN_OTHER])


def test_auto_resolves_per_profile_and_never_goes_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "chat.db")
    vectors = tmp_path / "lancedb"
    auto = load_settings({"SEELEN_DATA_DIR": str(tmp_path)})
    assert auto.embedding_provider == "auto"  # the default
    assert embedding_provider(auto, store, vectors) == "local"  # a new user
    sid = store.create_session().session_id
    store.add_turns(sid, [("user", t, None, None) for t in ENGLISH * 20])
    assert embedding_provider(auto, store, vectors) == "local"
    store.add_turns(sid, [("user", t, None, None) for t in OTHER])
    assert embedding_provider(auto, store, vectors) == "multilingual"
    chosen = load_settings({"SEELEN_DATA_DIR": str(tmp_path), "EMBEDDING_PROVIDER": "local"})
    assert embedding_provider(chosen, store, vectors) == "local"  # a choice is kept

    fresh = Store(tmp_path / "other.db")  # English only, but its vectors are multilingual
    ModelRecord(vectors / META_FILE).write({"model_id": E5Embedder.model_id, "dim": 384})
    assert embedding_provider(auto, fresh, vectors) == "multilingual"
    store.close()
    fresh.close()


def export(prefix: str, sessions: list[tuple[str, list[str]]]) -> str:
    """A `seelen export --format json` document of archived sessions of user turns."""
    out = []
    for n, (day, texts) in enumerate(sessions):
        turns = [
            {
                "text_id": f"{prefix}t{n}-{i}",
                "time": f"{day}T10:0{i}:00.000+00:00",
                "role": "user",
                "text": text,
            }
            for i, text in enumerate(texts)
        ]
        out.append(
            {
                "session_id": f"{prefix}s{n}",
                "status": "archived",
                "start": turns[0]["time"],
                "end": turns[-1]["time"],
                "summary": None,
                "rolling_summary": None,
                "turns": turns,
            }
        )
    return json.dumps({"format": "seelen-export", "version": 2, "sessions": out})


def test_importing_chinese_switches_auto_to_the_multilingual_model_and_reindexes(
    tmp_path: Path,
) -> None:
    chinese = [
        "我的猫叫小花，她最喜欢吃金枪鱼。",
        "今天天气很好，我们去公园散步了。",
        "明天要早起，今晚得早点睡。",
    ]
    with Memory.open(tmp_path, "p", TIMEZONE="UTC") as memory:
        memory.import_json(export("en", [("2025-03-01", ENGLISH)]))
        assert memory.recall("bike stolen")["turns"]
        assert memory._app.recall.embedder.model_id == LocalEmbedder().model_id
        memory.import_json(export("zh", [("2025-03-02", chinese)]))
        # Switched at once, in this process: everything is embedded again by the new model.
        assert memory._app.recall.embedder.model_id == E5Embedder.model_id
        assert memory._app.index.index.stored_model() == E5Embedder.model_id
        for question in ("我的宠物叫什么名字？", "What is my cat called?"):  # no shared word
            assert memory.recall(question, 3, "vector")["turns"][0]["text_id"] == "zht0-0"
    with Memory.open(tmp_path, "p", TIMEZONE="UTC") as memory:  # and it stays so
        assert memory._app.recall.embedder.model_id == E5Embedder.model_id
        assert not memory._app.index.behind()


async def test_a_running_chat_switches_after_a_session_in_another_language(tmp_path: Path) -> None:
    import asyncio

    from helpers import wait_until_async

    from seelen.app import build_app

    app = build_app(load_settings({"SEELEN_DATA_DIR": str(tmp_path)}), with_model=False)
    await app.open_session()
    app.start_background()  # the indexer thread, as in chat
    sid = app.store.create_session(status="archived").session_id
    app.store.add_turns(sid, [("user", t, None, None) for t in ENGLISH])
    app.index.wake()
    assert await asyncio.to_thread(app.index.wait_idle, 10)
    assert not app.follow_language()  # still English
    sid = app.store.create_session(status="archived").session_id
    cat = app.store.add_turns(sid, [("user", t, None, None) for t in OTHER[:MIN_OTHER]])[0]
    assert app.follow_language()
    await wait_until_async(lambda: not app.index.behind(), 30, "never re-indexed for Chinese")
    assert app.index.index.stored_model() == E5Embedder.model_id
    found = app.recall.search("What is my cat called?", None, "vector").turns
    assert found[0].text_id == cat.text_id
    await app.aclose()
