"""The SQLite store: schema, migrations, ordering, full-text search, safety."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from seelen.store import ARCHIVED, Store
from seelen.store.schema import MIGRATIONS, fts_query


def test_schema_has_the_design_tables_and_migrations_are_recorded(tmp_path: Path) -> None:
    store = Store(tmp_path / "chat_sessions.db")
    assert store.applied_migrations() == [
        "m001_initial",
        "m002_full_text",
        "m003_archive_steps",
        "m004_fts_by_session",
        "m005_fold_by_seq",
        "m006_fts_any_language",
        "m007_turn_time",
    ]
    store.close()
    db = sqlite3.connect(tmp_path / "chat_sessions.db")
    cols = {
        t: {r[1] for r in db.execute(f"PRAGMA table_info({t})")}
        for t in ("session", "conversation", "summary")
    }
    assert {
        "session_id",
        "start_timestamp",
        "end_timestamp",
        "status",
        "current_conv_count",
    } <= cols["session"]
    assert {"session_id", "timestamp", "role", "text", "text_id"} <= cols["conversation"]
    assert {"session_id", "summary", "text_id"} <= cols["summary"]
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Reopening applies nothing twice.
    assert Store(tmp_path / "chat_sessions.db").applied_migrations()[-1] == MIGRATIONS[-1].__name__


def test_a_database_from_an_older_version_is_migrated_with_its_text(tmp_path: Path) -> None:
    from seelen.store.schema import MIGRATIONS

    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER)")
    for migration in MIGRATIONS[:3]:
        db.executescript(
            f"BEGIN; {migration()}; INSERT INTO migrations "
            f"VALUES ('{migration.__name__}', 0); COMMIT;"
        )
    db.execute("INSERT INTO session (session_id, start_timestamp) VALUES ('s1', 1)")
    db.execute(
        "INSERT INTO conversation (text_id, session_id, timestamp, role, text) "
        "VALUES ('t1', 's1', 1, 'user', 'our old kayak is red')"
    )
    db.execute(
        "INSERT INTO conversation (text_id, session_id, timestamp, role, text) "
        "VALUES ('t2', 's1', 2, 'tool', 'kayak rental api output')"
    )
    db.execute(
        "INSERT INTO conversation (text_id, session_id, timestamp, role, text) "
        "VALUES ('t3', 's1', 3, 'user', '我的猫叫小花，她最喜欢吃金枪鱼。')"
    )
    db.close()
    store = Store(tmp_path / "old.db")
    assert store.applied_migrations()[-4:] == [
        "m004_fts_by_session",
        "m005_fold_by_seq",
        "m006_fts_any_language",
        "m007_turn_time",
    ]
    assert [text_id for text_id, _ in store.search_turns_text("kayak", 5)] == ["t1"]
    # Chinese stored before the upgrade is searchable after it; the text itself is unaltered.
    assert [text_id for text_id, _ in store.search_turns_text("猫", 5)] == ["t3"]
    assert store.get_turns(["t3"])["t3"].text == "我的猫叫小花，她最喜欢吃金枪鱼。"
    store.delete_texts(["t1", "t2", "t3"])  # the triggers keep the word index consistent
    assert store.search_turns_text("kayak", 5) == []
    assert store.search_turns_text("猫", 5) == []
    assert store.quick_check() == "ok"


def test_chinese_is_searchable_by_words(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    sid = store.create_session().session_id
    cat = store.add_turn(sid, "user", "我的猫叫小花，她最喜欢吃金枪鱼。")
    store.add_turn(sid, "user", "今天天气很好，我们去公园散步了。")
    tuna = store.add_turn(sid, "assistant", "Tuna (金枪鱼) is her favourite, noted!")
    assert [i for i, _ in store.search_turns_text("我的猫叫什么名字？", 5)] == [cat.text_id]
    assert {i for i, _ in store.search_turns_text("金枪鱼", 5)} == {cat.text_id, tuna.text_id}
    assert store.search_turns_text("鱼金", 5) == []  # pairs match side by side, in order
    store.update_turn_text(cat.text_id, "我的狗叫大黄。")
    assert store.search_turns_text("小花", 5) == []
    assert [i for i, _ in store.search_turns_text("大黄", 5)] == [cat.text_id]
    summary = store.add_summary(sid, "用户的猫叫小花，喜欢金枪鱼。", 0, 1)
    assert [i for i, _ in store.search_summaries_text("小花", 5)] == [summary.text_id]


def test_turns_in_the_same_second_keep_their_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    sid = store.create_session().session_id
    for i in range(50):
        store.add_turn(sid, "user" if i % 2 == 0 else "assistant", f"turn {i}")
    turns = store.turns(sid)
    assert [t.text for t in turns] == [f"turn {i}" for i in range(50)]
    assert all(t.ts_ms > 1_600_000_000_000 for t in turns)  # milliseconds, not seconds
    assert [t.ts_ms for t in turns] == sorted(t.ts_ms for t in turns)
    assert store.get_session(sid).conv_count == 50


def test_a_turn_is_committed_when_add_turn_returns(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    sid = store.create_session().session_id
    store.add_turn(sid, "user", "remember the milk")
    # A second, independent connection (another process after a crash) sees it at once.
    other = sqlite3.connect(tmp_path / "db")
    assert other.execute("SELECT text FROM conversation").fetchall() == [("remember the milk",)]


def test_full_text_search_ranks_and_filters_safely(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    a = store.create_session().session_id
    quoted = "b' OR '1'='1"
    store._db.execute("INSERT INTO session (session_id, start_timestamp) VALUES (?, 0)", (quoted,))
    store.add_turn(a, "user", "My sister Lena lives in Porto")
    store.add_turn(a, "assistant", "Porto is lovely in spring")
    hit = store.add_turn(quoted, "user", "Lena's birthday is in March")
    assert store.search_turns_text("where does Lena live?", 5)[0][0] != hit.text_id
    ids = [i for i, _ in store.search_turns_text("Lena", 5, exclude_session=a)]
    assert ids == [hit.text_id]
    assert [i for i, _ in store.search_turns_text("Lena", 5, only_sessions=[quoted])] == [
        hit.text_id
    ]
    assert store.search_turns_text("Lena", 5, only_sessions=["nope' OR 1=1 --"]) == []
    # FTS syntax in user text is treated as words, never as query operators.
    assert store.search_turns_text('Lena" OR NEAR(x', 5)
    assert fts_query('a "b" c*') == '"b" OR "c"'


def test_delete_session_removes_text_everywhere(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    sid = store.create_session().session_id
    turn = store.add_turn(sid, "user", "secret plan about zebras")
    store.add_summary(sid, "talked about zebras", 1, 2)
    deleted = store.delete_session(sid)
    assert turn.text_id in deleted and len(deleted) == 2
    assert store.search_turns_text("zebras", 5) == []
    assert store.search_summaries_text("zebras", 5) == []
    assert store.get_session(sid) is None


def test_archive_marks_end_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    sid = store.create_session().session_id
    store.mark_archived(sid)
    session = store.get_session(sid)
    assert session.status == ARCHIVED and session.end_ms is not None
    assert store.active_session() is None


def test_the_fold_boundary_is_a_seq_so_forgetting_a_folded_turn_keeps_the_window(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "chat_sessions.db")
    sid = store.create_session().session_id
    turns = store.add_turns(sid, [("user", f"t{i}", None, None) for i in range(6)])
    store.set_rolling_summary(sid, "first three", 3, turns[2].seq)
    session = store.get_session(sid)
    live = store.turns(sid, after_seq=session.folded_upto_seq)
    assert [t.text for t in live] == ["t3", "t4", "t5"]
    store.delete_texts([turns[0].text_id])  # forget a folded turn
    assert [t.text for t in store.turns(sid, after_seq=session.folded_upto_seq)] == [
        "t3",
        "t4",
        "t5",
    ]
    assert [t.text for t in store.turns(sid, upto_seq=turns[4].seq)][-1] == "t4"


def test_an_old_fold_count_becomes_the_seq_it_reached(tmp_path: Path) -> None:
    from seelen.store.schema import MIGRATIONS

    path = tmp_path / "chat_sessions.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER)")
    for migration in MIGRATIONS[:4]:  # a database of the previous version
        db.executescript(migration())
        db.execute("INSERT INTO migrations VALUES (?, 0)", (migration.__name__,))
    db.execute("INSERT INTO session (session_id, start_timestamp) VALUES ('s', 0)")
    for i in range(5):
        db.execute(
            "INSERT INTO conversation (text_id, session_id, timestamp, role, text) "
            "VALUES (?, 's', ?, 'user', ?)",
            (f"id{i}", i, f"t{i}"),
        )
    db.execute("UPDATE session SET folded_count = 2, rolling_summary = 'two'")
    db.close()
    store = Store(path)
    session = store.get_session("s")
    assert [t.text for t in store.turns("s", after_seq=session.folded_upto_seq)] == [
        "t2",
        "t3",
        "t4",
    ]


def _days(path: Path, verb: str, days: int) -> tuple[Store, str]:
    """A memory whose common-word bound is scaled down to 5 turns, holding one archived
    session of `days` turns "I <verb> day <n>"."""
    store = Store(path, common_rows=5)
    sid = store.create_session("archived").session_id
    store.add_turns(sid, [("user", f"I {verb} day {n}", None, None) for n in range(days)])
    return store, sid


def test_words_held_by_very_many_turns_are_left_out_of_every_word_search(
    tmp_path: Path,
) -> None:
    store, sid = _days(tmp_path / "m.db", "like", 8)
    store.add_turn(sid, "user", "I like the lighthouse at Kullaberg")
    found = store.search_turns_text("do I like the lighthouse?", 10)
    # "like" is in 9 turns, over the bound: only "lighthouse" searches, and finds one.
    assert [store.get_turns([i])[i].text for i, _ in found] == [
        "I like the lighthouse at Kullaberg"
    ]
    assert store.search_turns_text("what do I like", 10) == []  # only common words: no hit
    # Inside named sessions too: FTS5 weighs a word by reading every row that holds it.
    assert store.search_turns_text("what do I like", 10, only_sessions=[sid]) == []
    inside = store.search_turns_text("do I like the lighthouse?", 10, only_sessions=[sid])
    assert [i for i, _ in inside] == [i for i, _ in found]
    shares = store.word_shares("do I like the lighthouse?", [i for i, _ in found])
    assert list(shares.values()) == [1.0]  # the common word weighs nothing


def test_a_word_turns_common_as_soon_as_enough_turns_hold_it_whoever_wrote_them(
    tmp_path: Path,
) -> None:
    store, sid = _days(tmp_path / "m.db", "like", 5)
    assert len(store.search_turns_text("what do I like", 10)) == 5  # counted, and kept
    store.add_turn(sid, "user", "I like day 5")  # written here: six turns hold it now
    assert store.search_turns_text("what do I like", 10) == []
    other, other_sid = _days(tmp_path / "n.db", "enjoy", 5)
    assert len(other.search_turns_text("what do I enjoy", 10)) == 5
    writer = Store(tmp_path / "n.db")  # another connection (another process, in real use)
    writer.add_turn(other_sid, "user", "I enjoy day 5")
    assert other.search_turns_text("what do I enjoy", 10) == []
    writer.close()
    other.close()
    store.close()


def test_the_sessions_holding_a_word_are_counted_when_their_turns_interleave(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "m.db")
    one = store.create_session("archived").session_id
    two = store.create_session("archived").session_id
    store.add_turn(one, "user", "the lighthouse at dawn")
    store.add_turn(two, "user", "a lighthouse tour")  # the two sessions' rows interleave
    store.add_turn(one, "user", "the lighthouse again")
    store.add_turn(two, "user", "nothing of the sort")

    def held() -> dict[str, int]:
        names, words = store.session_words("a lighthouse?")
        found, turns = words[0]
        return {names[i]: int(n) for i, n in zip(found, turns, strict=True)}

    assert held() == {one: 2, two: 1}
    store.add_turn(two, "user", "the lighthouse keeper")  # read on the next question
    third = store.create_session("archived").session_id
    store.add_turns(
        third, [("user", "lighthouse", None, None), ("assistant", "a lighthouse", None, None)]
    )
    assert held() == {one: 2, two: 2, third: 2}
    store.close()
