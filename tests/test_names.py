"""The text a question is embedded as: without the names most of the memory holds (a
transcript's speakers), with the names few turns hold; on a real Store."""

from __future__ import annotations

from pathlib import Path

from seelen.memory.names import for_meaning
from seelen.store import Store


def transcript(tmp_path: Path, lines: list[str]) -> Store:
    store = Store(tmp_path / "chat.db")
    sid = store.create_session(start_ms=0).session_id
    store.add_turns(sid, [("user", line, None, i * 1000) for i, line in enumerate(lines)])
    return store


def test_a_name_most_turns_hold_is_left_out_of_the_embedded_question(tmp_path: Path) -> None:
    store = transcript(
        tmp_path,
        [
            "Dave: I restored an old car with my dad when I was ten.",
            "Calvin: Thanks, Dave! My tour starts in Tokyo next week.",
            "Dave: Auto engineering is what I want to do for a living.",
            "Calvin: Lena from the studio sends her regards.",
            "Dave: Good luck on the tour!",
            "Calvin: I wrote a new song yesterday.",
        ],
    )
    # Dave (4 of 6 turns) and Calvin (3 of 6) are everywhere; Lena and Tokyo are not.
    assert for_meaning(store, "What is Dave's main passion?") == "What is main passion?"
    assert for_meaning(store, "Did Calvin meet Lena in Tokyo?") == "Did meet Lena in Tokyo?"
    assert for_meaning(store, "What did Lena send?") == "What did Lena send?"
    assert for_meaning(store, "Dave?") == "Dave?"  # nothing would be left: kept whole
    assert for_meaning(store, "what does dave love?") == "what does dave love?"  # not a name
    store.close()


def test_a_memory_too_large_to_count_is_judged_by_its_newest_turns(tmp_path: Path) -> None:
    lines = [f"Calvin: note number {i}" for i in range(20)]
    store = transcript(tmp_path, lines + [f"Dave: note number {i}" for i in range(20)])
    store.common_rows = 5  # counts stop at 6 rows: the share is that of the newest 5 / 0.25
    # Dave holds the newest 20 turns, Calvin only older ones: Dave's name says nothing now.
    assert for_meaning(store, "What is Dave's main passion?") == "What is main passion?"
    assert for_meaning(store, "What is Calvin's passion?") == "What is Calvin's passion?"
    store.close()
