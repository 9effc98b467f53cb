"""Other assistants' histories: what is read from each export, and how it is stored."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from history_exports import T0, chatgpt_export, claude_export, gpt_message, write_zip

from seelen.memory.clock import Clock
from seelen.memory.imports import chatgpt, claude
from seelen.memory.imports.conversation import HistoryError, stable_id
from seelen.memory.imports.source import read_export
from seelen.memory.imports.writer import HistoryReport, write_history
from seelen.store import Store

MS = round(T0 * 1000)


def store_at(tmp_path: Path) -> Store:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return Store(tmp_path / "chat_sessions.db")


def test_chatgpt_keeps_only_what_the_user_saw_on_the_current_branch() -> None:
    bees, bread = chatgpt.read(chatgpt_export())
    assert bees.title == "Rooftop beekeeping" and bread.title == "Sourdough"
    assert [(m.role, m.text) for m in bees.messages] == [
        ("user", "Which beehive suits a small rooftop garden?"),
        ("assistant", "A Warré hive: light, and 36 frames fit."),  # citation marker gone
        ("user", "[image]\nIs this comb healthy?\n[file: comb.jpg]"),
        ("assistant", "It looks healthy."),
    ]
    everything = json.dumps([m.text for m in bees.messages])
    for left_out in ("balcony", "top-bar", "Graz", "SECRET", "Thought for", "print(", '36"'):
        assert left_out not in everything
    # The answer without a time takes the time of the node just before it (the tool output).
    assert [m.ts_ms for m in bees.messages] == [
        MS + 60_000,
        MS + 64_000,
        MS + 120_000,
        MS + 125_000,
    ]
    assert bees.messages[1].meta == {"model": "gpt-4o"}


def test_chatgpt_without_current_node_follows_the_newest_leaf() -> None:
    data = chatgpt_export()
    data[0]["current_node"] = None
    bees = chatgpt.read(data)[0]
    assert bees.messages[-1].text == "It looks healthy."


def test_claude_reads_text_blocks_of_the_current_branch() -> None:
    trip, bike = claude.read(claude_export())
    assert trip.title == "Train to Trieste"
    assert [(m.role, m.text) for m in trip.messages] == [
        ("user", "How far is it by train from Ljubljana to Trieste?\n[file: itinerary.txt]"),
        ("assistant", "The train takes about two and a half hours."),
        ("user", "Thanks, I will book the 8:15.\n[file: ticket.png]"),
    ]
    text = json.dumps([m.text for m in trip.messages])
    assert "PRIVATE" not in text and "SEARCH RESULT" not in text and "150 km" not in text
    first = trip.messages[0].ts_ms
    assert first == 1_717_232_520_123  # 2024-06-01T09:02:00.123Z
    assert [m.ts_ms for m in trip.messages] == [first, None, first + 59_877]
    assert [(m.role, m.text) for m in bike.messages] == [
        ("user", "My bike is a green Gazelle."),
        ("assistant", "A classic Dutch bike!"),
    ]


def test_written_with_derived_ids_times_and_a_summary(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    report = write_history(store, chatgpt.read(chatgpt_export()), Clock("UTC"))
    assert (report.conversations, report.sessions, report.turns, report.summaries) == (2, 2, 6, 2)
    sid = stable_id("chatgpt", "6650f1a2-aaaa-8000-9000-0123456789ab")
    session = store.get_session(sid)
    assert session is not None and session.status == "archived"
    assert (session.start_ms, session.end_ms) == (MS + 60_000, MS + 125_000)
    turns = store.turns(sid)
    assert [t.ts_ms for t in turns] == [MS + 60_000, MS + 64_000, MS + 120_000, MS + 125_000]
    assert turns[1].meta == {"source": "chatgpt", "model": "gpt-4o"}
    summary = store.session_summary(sid)
    assert summary is not None
    assert summary.text.startswith("ChatGPT conversation “Rooftop beekeeping” (2024-05-20): ")
    assert "Which beehive suits" in summary.text and "Warré" in summary.text
    assert store.count_unindexed() == 6 + 2  # every turn and summary waits for its vector
    assert store.search_turns_text("Gerald starter", 5)  # the words are searchable at once


def test_importing_again_adds_nothing_and_a_grown_export_only_what_is_new(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    data = chatgpt_export()
    write_history(store, chatgpt.read(data), Clock("UTC"))
    again = write_history(store, chatgpt.read(data), Clock("UTC"))
    assert (again.sessions, again.turns, again.summaries) == (0, 0, 0)
    assert "everything was already here" in again.describe()
    # A conversation with nothing to keep was never here: it is not said to be.
    nothing = HistoryReport("claude", conversations=1, sessions=0, turns=0, summaries=0, empty=1)
    assert nothing.describe() == (
        "Imported 0 turns in 0 new sessions from Claude (1 conversation in the export, "
        "1 with nothing to keep)."
    )

    grown = copy.deepcopy(data)
    bread = grown[1]
    late = gpt_message("s3", "user", ["Gerald now lives in the fridge."], time=T0 + 90_000)
    bread["mapping"]["s3"] = {"id": "s3", "message": late, "parent": "s2", "children": []}
    bread["mapping"]["s2"]["children"].append("s3")
    bread["current_node"] = "s3"
    report = write_history(store, chatgpt.read(grown), Clock("UTC"))
    assert (report.sessions, report.turns, report.summaries) == (0, 1, 0)
    sid = stable_id("chatgpt", bread["id"])
    assert [t.text for t in store.turns(sid)][-1] == "Gerald now lives in the fridge."
    session = store.get_session(sid)
    assert session is not None and session.end_ms == round((T0 + 90_000) * 1000)
    assert store.count_turns() == 7


def test_an_interrupted_import_keeps_whole_conversations_and_resumes(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    conversations = chatgpt.read(chatgpt_export())

    def stop_after_first_batch(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_history(store, conversations, Clock("UTC"), stop_after_first_batch, batch_turns=1)
    assert store.count_turns() == 4  # the first conversation, whole; nothing of the second
    report = write_history(store, conversations, Clock("UTC"))
    assert (report.sessions, report.turns) == (1, 2)
    assert store.count_turns() == 6


def test_files_are_recognised_by_their_content(tmp_path: Path) -> None:
    gpt = write_zip(tmp_path / "chatgpt.zip", chatgpt_export(), folder="")
    nested = write_zip(tmp_path / "claude.zip", claude_export(), folder="data-2024/")
    plain = tmp_path / "conversations.json"
    plain.write_text(json.dumps(claude_export()), "utf-8")
    assert read_export(str(gpt)).kind == "chatgpt"
    assert len(read_export(str(gpt)).conversations) == 2
    assert read_export(str(nested)).kind == "claude"
    assert read_export(str(plain), "claude").kind == "claude"
    seelen = tmp_path / "export.json"
    seelen.write_text(json.dumps({"format": "seelen-export", "sessions": []}), "utf-8")
    assert read_export(str(seelen)).kind == "seelen"


@pytest.mark.parametrize(
    ("content", "fmt", "message"),
    [
        (b'[{"mapping": {}, "id": "x"', None, "not JSON, or cut short"),
        (b'[{"hello": 1}]', None, "not ChatGPT's or Claude's"),
        (b"[1, 2]", "claude", "conversation 1 has no chat_messages"),
        (b'{"sessions": 3}', "chatgpt", "no list of conversations"),
        (b"PK\x03\x04 cut short", None, "not a readable zip"),
        (b"\xff\xfe not text", None, "is not UTF-8 text"),
    ],
)
def test_what_is_not_such_an_export_is_one_error(
    tmp_path: Path, content: bytes, fmt: str | None, message: str
) -> None:
    path = tmp_path / "file"
    path.write_bytes(content)
    with pytest.raises(HistoryError, match=message):
        read_export(str(path), fmt)


def test_the_wrong_format_or_an_empty_zip_says_so(tmp_path: Path) -> None:
    import sqlite3

    from history_exports import zip_bytes_without_conversations

    sqlite3.connect(tmp_path / "logs.db").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(HistoryError, match="an SQLite file, not ChatGPT's export: use --from llm"):
        read_export(str(tmp_path / "logs.db"), "chatgpt")
    with pytest.raises(HistoryError, match=r"an SQLite file, but not llm's logs\.db"):
        read_export(str(tmp_path / "logs.db"))

    gpt = write_zip(tmp_path / "chatgpt.zip", chatgpt_export())
    with pytest.raises(HistoryError, match="this is ChatGPT's export, not Claude's: use --from"):
        read_export(str(gpt), "claude")
    empty = tmp_path / "empty.zip"
    empty.write_bytes(zip_bytes_without_conversations())
    with pytest.raises(HistoryError, match=r"holds no conversations\.json"):
        read_export(str(empty))
    truncated = tmp_path / "cut.zip"
    truncated.write_bytes(gpt.read_bytes()[:-40])
    with pytest.raises(HistoryError, match="not a readable zip"):
        read_export(str(truncated))


def test_odd_values_in_an_export_are_skipped_not_a_crash() -> None:
    data = chatgpt_export()
    mapping = data[0]["mapping"]
    mapping["a2"]["message"]["content"]["parts"] = None  # no parts: nothing shown
    mapping["q2"]["message"]["recipient"] = None  # a missing recipient is everyone
    mapping["stray"] = "not a node"
    mapping["a1"]["parent"] = "stray"  # the path runs into it and ends there
    bees = chatgpt.read(data)[0]
    assert [m.text for m in bees.messages] == [
        "A Warré hive: light, and 36 frames fit.",
        "[image]\nIs this comb healthy?\n[file: comb.jpg]",
    ]
    odd = claude_export()
    odd[1]["chat_messages"][0]["sender"] = ["human"]
    odd[1]["chat_messages"][1]["files"] = "not a list"
    assert [m.text for m in claude.read(odd)[1].messages] == ["A classic Dutch bike!"]
