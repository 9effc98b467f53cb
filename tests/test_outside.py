"""The outside interface: `seelen import`, `export -o`, `memory search --json [--batch]`,
and the Python API, on a real store, LanceDB index and embedding model."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import open_store, run_cli

from seelen.api import Memory
from seelen.memory.clock import Clock
from seelen.memory.context import estimate_tokens
from seelen.memory.persona import PersonaFiles
from seelen.memory.transfer import render_export
from seelen.store import Store

T0 = 1_700_000_000_123
LONG = "My grandmother's recipe for plum cake, which I wrote down for you: " + "flour " * 120


def elsewhere(tmp_path: Path) -> tuple[Store, PersonaFiles]:
    """The store and files of another profile, to write an export from."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    files = PersonaFiles(directory)
    files.ensure()
    return open_store(tmp_path, "elsewhere"), files


def exported(tmp_path: Path, store: Store, files: PersonaFiles) -> Path:
    """That profile exported as JSON by Seelen itself; the store is closed."""
    path = tmp_path / "export.json"
    path.write_text(render_export(store, files, Clock("UTC"), "json"), "utf-8")
    store.close()
    return path


def export_file(tmp_path: Path) -> Path:
    """An export with two archived sessions, written by Seelen itself from another profile."""
    store, files = elsewhere(tmp_path)
    trip = store.create_session(start_ms=T0)
    store.add_turns(
        trip.session_id,
        [
            ("user", "I am allergic to peanuts, remember that.", None, T0),
            ("assistant", "I will remember your peanut allergy.", None, T0 + 1500),
        ],
    )
    store.add_summary(trip.session_id, "The user has a peanut allergy.", T0, T0 + 1500)
    store.mark_archived(trip.session_id)
    cake = store.create_session(start_ms=T0 + 86_400_000)
    store.add_turns(cake.session_id, [("user", LONG, None, T0 + 86_400_000)])
    store.mark_archived(cake.session_id)
    return exported(tmp_path, store, files)


def test_import_then_search_json_and_batch(tmp_path: Path, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("TIMEZONE", "UTC")
    # The smallest prompt: the long turn cannot fit the recalled-turns share (20% of 512).
    monkeypatch.setenv("CONTEXT_TOKENS", "512")
    source = export_file(tmp_path)
    result = run_cli("import", str(source))
    assert result.returncode == 0, result.stderr
    assert "Imported 2 sessions, 3 turns and 1 summary." in result.stderr
    assert open_store(data_dir).count_unindexed() == 0  # indexed right away

    found = run_cli("memory", "search", "--json", "peanut allergy")
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    top = data["turns"][0]
    assert "peanut" in top["text"] and top["rank"] == 1 and top["in_prompt"] is True
    assert set(top) >= {"text_id", "session_id", "time", "role", "score", "rankers"}
    assert top["rankers"]["bm25"] >= 1 and "vector" in top["rankers"]
    assert data["summaries"][0]["text"] == "The user has a peanut allergy."
    assert data["summaries"][0]["time"] == "2023-11-14T22:13:20.123+00:00"

    cake = run_cli("memory", "search", "--json", "plum cake recipe")
    item = json.loads(cake.stdout)["turns"][0]
    assert item["text"] == LONG and item["in_prompt"] is False

    batch = run_cli(
        "memory", "search", "--json", "--batch", "--limit", "1", stdin="plum cake\n\npeanuts\n"
    )
    assert batch.returncode == 0, batch.stderr
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [d["query"] for d in lines] == ["plum cake", "", "peanuts"]
    assert lines[0]["turns"][0]["text"] == LONG
    # After the one ranked turn asked for: only the other turns chat puts in its prompt.
    assert all(t["in_prompt"] and t["rank"] != 1 for t in lines[0]["turns"][1:])
    assert lines[1]["turns"] == [] and "peanut" in lines[2]["turns"][0]["text"]

    again = run_cli("import", str(source))
    assert "Imported 0 sessions, 0 turns and 0 summaries." in again.stderr


def test_export_to_a_file_exits_zero(data_dir: Path) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    session = store.create_session()
    store.add_turn(session.session_id, "user", "Keep this exactly.")
    out = data_dir / "out.json"
    result = run_cli("export", "-o", str(out))
    assert result.returncode == 0, result.stderr
    texts = [t["text"] for s in json.loads(out.read_text("utf-8"))["sessions"] for t in s["turns"]]
    assert texts == ["Keep this exactly."]


def test_python_api_opens_imports_and_recalls(tmp_path: Path) -> None:
    source = export_file(tmp_path)
    with Memory.open(tmp_path / "api-data", "mine", TIMEZONE="UTC") as memory:
        report = memory.import_json(source.read_text("utf-8"))
        assert (report.sessions, report.turns, report.summaries) == (2, 3, 1)
        hits = memory.recall("peanuts", limit=1, mode="bm25")
        assert len(hits["turns"]) == 1 and "peanut" in hits["turns"][0]["text"]
        assert (
            hits["turns"][0]["rankers"]["bm25"] == 1 and "vector" not in hits["turns"][0]["rankers"]
        )
        assert memory.export()["sessions"] == json.loads(source.read_text("utf-8"))["sessions"]
    assert (tmp_path / "api-data" / "mine" / "chat_sessions.db").is_file()


def test_import_and_batch_search_as_a_user_runs_them(tmp_path: Path, data_dir: Path) -> None:
    source = export_file(tmp_path)
    imported = run_cli("import", "-", stdin=source.read_text("utf-8"))
    assert imported.returncode == 0, imported.stderr
    searched = run_cli("memory", "search", "--json", "--batch", stdin="peanut\nplum cake\n")
    assert searched.returncode == 0, searched.stderr
    first, second = (json.loads(line) for line in searched.stdout.splitlines())
    assert "peanut" in first["turns"][0]["text"] and second["turns"][0]["text"] == LONG

    bad = run_cli("import", "-", stdin="{" * 5)
    assert bad.returncode == 1
    assert bad.stderr.startswith("seelen: import: not JSON") and bad.stderr.count("\n") == 1


def test_search_json_lists_the_context_turns_chat_puts_in_the_prompt(tmp_path: Path) -> None:
    store, files = elsewhere(tmp_path)
    day = store.create_session(start_ms=T0)
    asked, answer = store.add_turns(
        day.session_id,
        [
            ("assistant", "Which cheese do you like best on your bread?", None, T0),
            ("user", "Gouda, always.", None, T0 + 60_000),
        ],
    )
    store.mark_archived(day.session_id)
    path = exported(tmp_path, store, files)
    # Room for one recalled turn and its context: the question brings the answer.
    with Memory.open(tmp_path / "data", "mine", TIMEZONE="UTC", RECALL_CONV_NUM=2) as memory:
        memory.import_json(path.read_text("utf-8"))
        found = memory.recall("which cheese do you like best")
        by_id = {t["text_id"]: t for t in found["turns"]}
        assert set(by_id) == {asked.text_id, answer.text_id}
        assert by_id[asked.text_id]["rank"] == 1 and by_id[asked.text_id]["context_for"] is None
        assert by_id[answer.text_id]["context_for"] == asked.text_id
        assert all(t["in_prompt"] and t["passage"] == 1 for t in found["turns"])
        lines = [f"- [00:00] {t['role']}: {t['text']}" for t in found["turns"]]
        assert found["prompt_tokens"] >= sum(estimate_tokens(line) for line in lines)
