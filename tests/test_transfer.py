"""Export and import of a profile's memory: exact round trip, idempotence, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seelen.errors import SeelenError
from seelen.memory.clock import Clock
from seelen.memory.persona import PROFILE, PersonaFiles
from seelen.memory.transfer import (
    export_chunks,
    export_data,
    export_markdown,
    import_export,
    render_export,
    to_ms,
)
from seelen.store import Store

# A fixed instant with a millisecond part, in a zone with a non-zero offset.
T0 = 1_700_000_000_123
ZONE = "Asia/Kolkata"


def profile(directory: Path) -> tuple[Store, PersonaFiles, Clock]:
    directory.mkdir(parents=True, exist_ok=True)
    files = PersonaFiles(directory)
    files.ensure()
    return Store(directory / "chat_sessions.db"), files, Clock(ZONE)


def seed(store: Store, files: PersonaFiles) -> dict[str, str]:
    """An archived session with a summary, and an active one with a rolling summary."""
    old = store.create_session(start_ms=T0)
    store.add_turns(
        old.session_id,
        [
            ("user", "I am allergic to peanuts", None, T0 + 1),
            ("assistant", "Noted: no peanuts.", {"model": "m"}, T0 + 1),  # same millisecond
            ("tool", "{}", {"name": "get_time"}, T0 + 999),
        ],
    )
    store.add_summary(old.session_id, "The user is allergic to peanuts.", T0 + 1, T0 + 999)
    store.mark_archived(old.session_id)
    live = store.create_session(start_ms=T0 + 86_400_000)
    cat = store.add_turn(live.session_id, "user", "我的猫叫小花 🐱 שלום", ts_ms=T0 + 86_400_001)
    store.set_rolling_summary(live.session_id, "They talked about a cat.", 1, cat.seq)
    files.write(PROFILE, "Allergic to peanuts.\n")
    return {"archived": old.session_id, "active": live.session_id}


def test_the_export_written_a_session_at_a_time_is_the_whole_object_dumped(
    tmp_path: Path,
) -> None:
    """`export_chunks` streams; joined, it is exactly the dump of `export_data` (JSON and
    Markdown), for an empty profile too."""
    store, files, clock = profile(tmp_path / "a")
    for filled in (False, True):
        if filled:
            seed(store, files)
        data = export_data(store, files, clock)
        chunks = list(export_chunks(store, files, clock, "json"))
        assert "".join(chunks) == json.dumps(data, ensure_ascii=False, indent=2)
        assert len(chunks) == 2 + len(data["sessions"])  # one piece per session
        markdown = "".join(export_chunks(store, files, clock, "markdown"))
        assert markdown == export_markdown(data) == render_export(store, files, clock, "markdown")


def test_export_import_export_is_identical(tmp_path: Path) -> None:
    store, files, clock = profile(tmp_path / "a")
    ids = seed(store, files)
    first = render_export(store, files, clock, "json")

    store2, files2, clock2 = profile(tmp_path / "b")
    report = import_export(store2, files2, clock2, first)
    assert (report.sessions, report.turns, report.summaries) == (2, 4, 1)
    assert render_export(store2, files2, clock2, "json") == first

    archived = store2.get_session(ids["archived"])
    assert archived is not None and archived.status == "archived"
    assert store2.session_summary(ids["archived"]).text == "The user is allergic to peanuts."
    active = store2.get_session(ids["active"])
    assert active is not None and active.status == "active" and active.folded_count == 1
    assert [t.ts_ms for t in store2.turns(ids["archived"])] == [T0 + 1, T0 + 1, T0 + 999]
    # The tool turn is kept but never queued for the vector index; spoken turns are.
    assert store2.count_unindexed() == 3 + 1
    assert files2.profile == "Allergic to peanuts.\n"


def test_times_keep_their_milliseconds(tmp_path: Path) -> None:
    store, files, clock = profile(tmp_path / "a")
    seed(store, files)
    data = json.loads(render_export(store, files, clock, "json"))
    first = data["sessions"][0]
    assert first["start"] == "2023-11-15T03:43:20.123+05:30"
    assert [to_ms(t["time"], clock, "") for t in first["turns"]] == [T0 + 1, T0 + 1, T0 + 999]


def test_importing_twice_adds_nothing(tmp_path: Path) -> None:
    store, files, clock = profile(tmp_path / "a")
    seed(store, files)
    text = render_export(store, files, clock, "json")
    store2, files2, clock2 = profile(tmp_path / "b")
    import_export(store2, files2, clock2, text)
    again = import_export(store2, files2, clock2, text)
    assert (again.sessions, again.turns, again.summaries, again.files) == (0, 0, 0, ())
    assert store2.count_turns() == 4
    assert render_export(store2, files2, clock2, "json") == text


def test_an_export_without_summary_ids_imports_once(tmp_path: Path) -> None:
    """Exports written before version 2 carry no summary id or span."""
    store, files, clock = profile(tmp_path / "a")
    ids = seed(store, files)
    data = json.loads(render_export(store, files, clock, "json"))
    for s in data["sessions"]:
        for key in ("summary_id", "summary_start", "summary_end", "folded_count"):
            s.pop(key)
    data.pop("version")
    store2, files2, clock2 = profile(tmp_path / "b")
    assert import_export(store2, files2, clock2, json.dumps(data)).summaries == 1
    assert import_export(store2, files2, clock2, json.dumps(data)).summaries == 0
    summary = store2.session_summary(ids["archived"])
    assert summary is not None and (summary.start_ms, summary.end_ms) == (T0 + 1, T0 + 999)


def test_an_active_session_joins_the_archive_when_the_profile_has_its_own(tmp_path: Path) -> None:
    store, files, clock = profile(tmp_path / "a")
    ids = seed(store, files)
    text = render_export(store, files, clock, "json")
    store2, files2, clock2 = profile(tmp_path / "b")
    own = store2.create_session()
    store2.add_turn(own.session_id, "user", "already talking here")  # (an empty one gives way)
    report = import_export(store2, files2, clock2, text)
    assert report.demoted == 1
    assert store2.active_session().session_id == own.session_id
    assert store2.get_session(ids["active"]).status == "archived"


def _bad_inputs(good: str) -> dict[str, str]:
    data = json.loads(good)
    late_error = json.loads(good)
    late_error["sessions"][1]["turns"][0]["time"] = "yesterday"  # after a valid session
    no_text = json.loads(good)
    del no_text["sessions"][0]["turns"][0]["text"]
    return {
        "not JSON": "{nope",
        "a list": "[1, 2]",
        "sessions not a list": json.dumps({**data, "sessions": {}}),
        "bad time": json.dumps(late_error),
        "missing text": json.dumps(no_text),
        "unknown status": json.dumps(
            {**data, "sessions": [{**data["sessions"][0], "status": "lost"}]}
        ),
        "deeply nested": '{"sessions": [' + "[" * 100_000 + "]" * 100_000 + "]}",
        "nested meta": json.dumps(data)[:-1] + ', "x": ' + "[" * 200 + "]" * 200 + "}",
        "newer version": json.dumps({**data, "version": 99}),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not JSON",
        "a list",
        "sessions not a list",
        "bad time",
        "missing text",
        "unknown status",
        "deeply nested",
        "nested meta",
        "newer version",
    ],
)
def test_bad_input_is_one_clear_error_and_writes_nothing(tmp_path: Path, case: str) -> None:
    store, files, clock = profile(tmp_path / "a")
    seed(store, files)
    bad = _bad_inputs(render_export(store, files, clock, "json"))[case]
    store2, files2, clock2 = profile(tmp_path / "b")
    before = files2.profile
    with pytest.raises(SeelenError) as err:
        import_export(store2, files2, clock2, bad)
    message = str(err.value)
    assert message.startswith("import: ") and "\n" not in message
    assert store2.list_sessions(limit=-1) == [] and store2.count_turns() == 0
    assert files2.profile == before


def test_an_unreadable_import_source_is_one_clear_error(tmp_path: Path) -> None:
    from seelen.cli.data import read_source

    with pytest.raises(SeelenError, match=r"^import: cannot read .*missing\.json"):
        read_source(str(tmp_path / "missing.json"))
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"sessions": [], "x": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(SeelenError, match="is not UTF-8 text"):
        read_source(str(latin1))


def test_an_export_with_a_blank_profile_leaves_the_profiles_own(tmp_path: Path) -> None:
    """The export of a profile that knew nothing yet wipes no one's profile or persona."""
    empty_store, empty_files, clock = profile(tmp_path / "empty")
    blank = json.loads(render_export(empty_store, empty_files, clock, "json"))
    blank.update(persona="", profile="  \n")
    store, files, _ = profile(tmp_path / "mine")
    seed(store, files)
    persona = files.persona
    report = import_export(store, files, clock, json.dumps(blank))
    assert report.files == ()
    assert (files.profile, files.persona) == ("Allergic to peanuts.\n", persona)
