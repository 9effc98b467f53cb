"""Seeing and steering memory from the command line, and `seelen doctor`."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import open_store, run_cli
from model_server import ModelServer, Reply
from test_memory import scripted


def seed(env: ModelServer) -> None:
    env.responder = scripted(
        {
            "summary": "The user told Seelen about a sailing trip to Hiddensee island.",
            "profile": "Likes sailing.",
            "persona": "I am Seelen.",
        }
    )
    result = run_cli("chat", stdin="We went sailing to Hiddensee island\n/save\n")
    assert result.returncode == 0, result.stderr


def test_search_sessions_show_export_and_forget(env: ModelServer, data_dir: Path) -> None:
    seed(env)
    found = run_cli("memory", "search", "Hiddensee")
    assert found.returncode == 0, found.stderr
    assert "Hiddensee" in found.stdout and "summary" in found.stdout
    store = open_store(data_dir)
    archived = next(s for s in store.list_sessions() if s.status == "archived")
    sid = archived.session_id

    listing = run_cli("sessions", "list")
    assert sid[:12] in listing.stdout and "archived" in listing.stdout
    shown = run_cli("sessions", "show", sid[:8])
    assert "We went sailing to Hiddensee island" in shown.stdout

    exported = run_cli("export", "--format", "json")
    data = json.loads(exported.stdout)
    texts = [t["text"] for s in data["sessions"] for t in s["turns"]]
    assert "We went sailing to Hiddensee island" in texts
    assert data["profile"].strip() == "Likes sailing."

    turn_id = store.turns(sid)[0].text_id
    forgot = run_cli("memory", "forget", turn_id)
    assert forgot.returncode == 0, forgot.stderr
    assert store.get_turns([turn_id]) == {}
    gone = run_cli("memory", "search", "sailing Hiddensee", "--mode", "vector")
    assert "We went sailing" not in gone.stdout

    run_cli("memory", "forget", "--session", sid)
    assert store.get_session(sid) is None


def test_forget_with_an_unknown_id_is_a_clear_error(env: ModelServer) -> None:
    result = run_cli("memory", "forget", "deadbeef")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "seelen: no memory has the id 'deadbeef' (see `seelen memory search`)"
    )


def test_profile_edit_keeps_the_old_version(env: ModelServer, data_dir: Path) -> None:
    run_cli("persona", "show")  # first run copies the shipped default
    edited = run_cli("persona", "edit", env={"EDITOR": "sed -i s/Seelen/Seelchen/"})
    assert edited.returncode == 0, edited.stderr
    shown = run_cli("persona", "show").stdout
    assert "Seelchen" in shown
    history = list((data_dir / "default" / "history").glob("persona_memory.*.txt"))
    assert len(history) == 1 and "I am Seelen" in history[0].read_text()


def test_doctor_reports_each_part(env: ModelServer, data_dir: Path) -> None:
    env.enqueue(Reply(text="ready"))
    ok = run_cli("doctor")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "openai" in ok.stdout and "test-model" in ok.stdout
    assert "✓ model answers" in ok.stdout and "✓ memory store" in ok.stdout
    assert "✓ vector index" in ok.stdout and str(data_dir) in ok.stdout.replace("\n", "")
    # One line a check, in a pipe too (the store's line, naming every migration, was broken).
    [store_line] = [line for line in ok.stdout.splitlines() if "memory store" in line]
    assert store_line.startswith("✓ memory store: ") and "m001_initial" in store_line
    assert store_line.rstrip().endswith("ms)") and len(store_line) > 80

    down = run_cli("doctor", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MAX_RETRIES": "0"})
    assert down.returncode == 1
    assert "✗ model answers" in down.stdout and "cannot reach" in down.stdout


def test_a_spoiled_persona_can_be_restored(env: ModelServer, data_dir: Path) -> None:
    run_cli("persona", "edit", env={"EDITOR": "sed -i s/warm/cold/"})
    run_cli("persona", "edit", env={"EDITOR": "sed -i s/curious/bored/"})
    listing = run_cli("persona", "history")
    assert listing.returncode == 0 and len(listing.stdout.strip().splitlines()) == 2
    restored = run_cli("persona", "restore", "2")  # the shipped original
    assert restored.returncode == 0, restored.stderr
    text = run_cli("persona", "show").stdout
    assert "warm" in text and "curious" in text and "cold" not in text
    assert run_cli("persona", "restore", "9").returncode == 2  # a wrong value: usage


def test_stored_text_is_shown_as_data_not_markup_or_terminal_commands(
    env: ModelServer, data_dir: Path
) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    pasted = "a [/x] bracket and \x1b]0;pwned\x07 a title change, [bold]loud[/bold]"
    store.add_turn(sid, "user", pasted)
    store.close()
    for args in (("sessions", "show", sid[:8]), ("memory", "search", "--mode", "bm25", "pwned")):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        out = " ".join(result.stdout.split())
        assert "[/x]" in out and "[bold]loud[/bold]" in out
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "␛]0;pwned␇" in out


def test_search_lists_turns_in_ranked_order_before_summaries(env: ModelServer) -> None:
    import io

    from rich.console import Console

    from seelen.chat.listings import render_hits
    from seelen.protocol.results import MemoryItem, SearchResult

    def item(kind: str, text: str, score: float, rank: int) -> MemoryItem:
        return MemoryItem(
            rank=rank,
            text_id=f"id-{text}",
            session_id="s" * 12,
            kind=kind,
            time="1970-01-01T00:00:00.000+00:00",
            end="1970-01-01T00:00:00.000+00:00" if kind == "summary" else None,
            role=None if kind == "summary" else "user",
            text=text,
            score=score,
            rankers={"bm25": rank},
            in_prompt=True,
        )

    result = SearchResult(
        query="peanut allergy",
        summaries=[item("summary", "a session about food", 0.02, 1)],
        turns=[
            item("turn", "I am allergic to peanuts", 0.03, 1),
            item("turn", "peanut butter", 0.01, 2),
            item("turn", "a satay sauce", 0.005, 9),  # lower, in chat's prompt as well
        ],
    )
    out = io.StringIO()
    render_hits(Console(file=out, width=200), result, 2)  # `memory search --limit 2`
    text = out.getvalue()
    assert text.index("allergic") < text.index("peanut butter") < text.index("about food")
    assert "satay" not in text and "2 turns" in text


def test_doctor_shows_indexing_under_way_as_such_and_no_exception_names(
    env: ModelServer, data_dir: Path
) -> None:
    from test_chat_exit import archived_history

    archived_history(data_dir)  # stored, not embedded yet: what a re-index leaves for a while
    env.enqueue(Reply(text="ready"))
    result = run_cli("doctor")
    shown = " ".join(result.stdout.split())
    assert result.returncode == 0, shown  # work in progress is no failure
    assert "… vector index: turns: 0 vectors for 1 text; 1 waiting to be indexed" in shown
    assert "✗" not in shown and "Error" not in shown
    assert run_cli("db", "repair").returncode == 0  # indexed now
    (data_dir / "default" / "lancedb.new").mkdir()  # where `memory reindex` builds anew
    env.enqueue(Reply(text="ready"))
    rebuilding = " ".join(run_cli("doctor").stdout.split())
    assert "… vector index: turns: 1 vector for 1 text;" in rebuilding
    assert "a re-index is being built beside the index" in rebuilding
    env.enqueue(Reply(text=""))
    empty = run_cli("doctor")
    shown = " ".join(empty.stdout.split())
    assert empty.returncode == 1
    assert "✗ model answers: the model returned an empty answer" in shown  # no RuntimeError


def test_a_limit_below_one_is_a_usage_error_not_a_silent_default(
    env: ModelServer, data_dir: Path
) -> None:
    """`--limit 0` listed 10 hits and `sessions list --limit -1` every session (SQLite's
    LIMIT -1): a count below one is refused, with exit code 2, before anything is opened."""
    env.enqueue("Noted.")
    assert run_cli("ask", "my boat is called Wave").returncode == 0
    for args in (
        ("memory", "search", "boat", "--limit", "0"),
        ("memory", "search", "boat", "--limit", "-3"),
        ("sessions", "list", "--limit", "0"),
        ("sessions", "list", "--limit", "-1"),
    ):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "--limit" in result.stderr and result.stdout == "", args
    assert "Wave" in run_cli("memory", "search", "boat", "--limit", "1").stdout


def test_export_into_a_folder_says_so_and_leaves_nothing(env: ModelServer, tmp_path: Path) -> None:
    """`export -o FOLDER` named a hidden temporary file beside the folder ("cannot use
    /tmp/.out.x1y2.tmp: Is a directory"); it names the folder and what to give instead."""
    env.enqueue("Noted.")
    assert run_cli("ask", "remember the harbour").returncode == 0
    place = tmp_path / "exports"
    folder = place / "out"
    folder.mkdir(parents=True)
    result = run_cli("export", "-o", str(folder))
    assert result.returncode == 1
    assert result.stderr == (
        f"seelen: export: {folder} is a folder; name a file to write, e.g. {folder}/seelen.json\n"
    )
    assert list(place.iterdir()) == [folder] and list(folder.iterdir()) == []
    # A folder that does not exist is refused (as cp or curl -o do), not made silently.
    missing = run_cli("export", "-o", str(place / "typo" / "b" / "c.json"))
    assert missing.returncode == 1
    assert missing.stderr == f"seelen: export: no such folder: {place}/typo/b (create it first)\n"
    assert list(place.iterdir()) == [folder]
    written = run_cli("export", "-o", str(folder / "c.json"))
    assert written.returncode == 0 and (folder / "c.json").stat().st_mode & 0o777 == 0o600


def test_sessions_show_keeps_each_turn_on_its_line_in_a_pipe(
    env: ModelServer, data_dir: Path
) -> None:
    """In a pipe Rich broke every turn at 80 columns, so `sessions show ID > file` or `| grep`
    got the user's words cut by newlines they never typed."""
    words = " ".join(f"word{n}" for n in range(40))  # about 280 characters
    env.enqueue("Noted.")
    assert run_cli("ask", words).returncode == 0
    store = open_store(data_dir)
    session = store.active_session()
    assert session is not None
    shown = run_cli("sessions", "show", session.session_id[:8])
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if "word0" in line]
    assert line.endswith(f" user: {words}")
