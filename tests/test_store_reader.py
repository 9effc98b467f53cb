"""The direct word search's own read-only connection (store/reader.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from seelen.store import Store

RANKED = "ORDER BY rank LIMIT"  # the direct word search's query, as SQLite runs it


def _memory(path: Path) -> tuple[Store, str, str]:
    store = Store(path)
    one = store.create_session("archived").session_id
    two = store.create_session("archived").session_id
    store.add_turn(one, "user", "the lighthouse keeper waved at dawn")
    store.add_turn(two, "user", "we toured a lighthouse in Brittany")
    return store, one, two


def _traced(db: sqlite3.Connection) -> list[str]:
    seen: list[str] = []
    db.set_trace_callback(seen.append)
    return seen


def test_the_search_over_the_whole_memory_leaves_the_main_connection_free(
    tmp_path: Path,
) -> None:
    store, one, two = _memory(tmp_path / "m.db")
    main = _traced(store._db)
    hits = store.search_turns_text("lighthouse keeper", 10, exclude_session=two)
    assert [store.get_turns([i])[i].session_id for i, _ in hits] == [one]
    assert not [s for s in main if RANKED in s]  # ranked on the second connection
    inside = store.search_turns_text("lighthouse", 10, only_sessions=[two])
    assert len(inside) == 1 and [s for s in main if RANKED in s]  # a narrow one stays
    # It reads what is committed, by any connection: a turn written just now is found.
    store.add_turn(two, "assistant", "the keeper of that lighthouse was my uncle")
    assert len(store.search_turns_text("lighthouse keeper", 10)) == 3
    store.close()
    assert store._second is not None and store._second._db is None  # closed with the store


def test_a_reader_searches_the_file_and_an_empty_memory_in_ram_alike(tmp_path: Path) -> None:
    writer, _, _ = _memory(tmp_path / "m.db")
    reader = Store(tmp_path / "m.db", read_only=True)
    assert reader.search_turns_text("lighthouse", 10) == writer.search_turns_text("lighthouse", 10)
    nothing = Store(tmp_path / "none.db", read_only=True)  # no file: held in RAM
    assert nothing.search_turns_text("lighthouse", 10) == []
    assert not (tmp_path / "none.db").exists()
    for store in (writer, reader, nothing):
        store.close()
