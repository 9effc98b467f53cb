"""Small things a newcomer met: what edit says it kept, counts in words, cut summaries,
which ranker found a hit."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import open_store, run_cli
from model_server import ModelServer
from rich.console import Console

from seelen.chat.render import EventPrinter
from seelen.memory.recalled import RecalledItem
from seelen.protocol.events import Recalled


def test_editing_an_empty_profile_says_no_earlier_version_was_kept(data_dir: Path) -> None:
    edited = run_cli("profile", "edit", env={"EDITOR": "sh -c 'echo I like tea > \"$0\"'"})
    assert edited.returncode == 0, edited.stderr
    assert "it was empty: no earlier version to keep" in edited.stdout
    assert "kept in history" not in edited.stdout
    assert not list((data_dir / "default" / "history").glob("user_profile.*"))
    again = run_cli("profile", "edit", env={"EDITOR": "sh -c 'echo I like coffee > \"$0\"'"})
    assert "previous version kept in history/" in again.stdout
    assert len(list((data_dir / "default" / "history").glob("user_profile.*"))) == 1


def item(kind: str, sources: dict[str, int]) -> RecalledItem:
    return RecalledItem("t1", "s1", kind, "a dog named Rex", "user", 1_000, 1_000, 0.5, sources)


def test_counts_read_as_words() -> None:
    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=100))

    def recalled(summaries: int, turns: int) -> Recalled:
        return Recalled(sessions=summaries, messages=turns, tokens=10 * turns)

    printer._other(recalled(1, 1))
    assert "recalled 1 past session and 1 past message (/why)" in out.getvalue()
    printer._other(recalled(2, 3))
    assert "recalled 2 past sessions and 3 past messages" in out.getvalue()


def test_a_memory_search_hit_says_which_ranker_found_it(env: ModelServer, data_dir: Path) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    store.add_turns(
        sid,
        [("user", "my dog Rex loves the beach", None, 1_000), ("user", "cats", None, 2_000)],
    )
    store.add_summary(sid, "Dad's birthday is on Saturday; we plan a picnic by the lake.", 1, 2)
    store.mark_archived(sid)
    store.close()
    found = " ".join(run_cli("memory", "search", "dog").stdout.replace("│", " ").split())
    assert "user (words + meaning): my dog Rex" in found
    assert "(meaning): cats" in found  # shares no word: found by meaning alone, and says so
    listed = run_cli("sessions", "list").stdout.splitlines()  # 80 columns: a pipe
    assert listed[0].startswith(f"{sid[:12]}  ") and listed[0].endswith("archived, 2 turns")
    # The summary whole, on its own line (a table column had room for "Dad…").
    assert listed[1] == "    Dad's birthday is on Saturday; we plan a picnic by the lake."


def test_sessions_list_counts_the_turns_that_are_left(data_dir: Path) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    turns = store.add_turns(sid, [("user", f"line {n}", None, n) for n in range(4)])
    store.mark_archived(sid)
    store.close()
    assert run_cli("memory", "forget", turns[1].text_id).returncode == 0
    listed = run_cli("sessions", "list").stdout.splitlines()
    assert listed[0].endswith("archived, 3 turns"), listed  # (before: 4, the forgotten one too)
    shown = run_cli("sessions", "show", sid[:8]).stdout
    assert [n for n in range(4) if f"line {n}" in shown] == [0, 2, 3]
    assert open_store(data_dir).get_session(sid).conv_count == 3  # the stored count follows


def test_one_of_anything_reads_as_one(tmp_path: Path, data_dir: Path) -> None:
    import json

    from history_exports import claude_export

    from seelen.memory.imports.summaries import Estimate
    from seelen.memory.indexer import Drift

    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(claude_export()[:1]), "utf-8")
    imported = run_cli("import", "--from", "claude", str(export))
    assert imported.returncode == 0, imported.stderr
    said = " ".join(imported.stderr.split())  # (stdout is left to what is asked for)
    assert " in 1 new session from Claude (1 conversation in the export)." in said
    assert (
        Estimate(("s",), 10, 20)
        .describe("m")
        .startswith("Summarising 1 conversation with m: 1 request,")
    )
    drift = Drift(
        "turns", texts=1, vectors=1, pending=0, missing=(), orphans=("a",), duplicates=("b",)
    )
    assert (
        drift.describe()
        == "turns: 1 vector for 1 text; 1 vector without a text; 1 text with several vectors"
    )


async def test_save_says_what_rewrite_files_auto_decided_and_why(env: ModelServer) -> None:
    from test_memory import open_app, say, scripted

    from seelen.chat.repl import Repl
    from seelen.config import load_settings
    from seelen.models.provider import Provider, files_kept_reason

    local, remote = Provider("local", "", "", "m", "m"), Provider("openai", "u", "k", "m", "m")
    settings = load_settings()
    assert files_kept_reason(settings, remote) == ""  # auto, an endpoint: it rewrites them
    assert files_kept_reason(load_settings({"REWRITE_FILES": "false"}), remote) == (
        "REWRITE_FILES=false"
    )
    env.responder = scripted({"summary": "Ada talked about Miso."})
    app = await open_app()
    app.sessions.keep_files = files_kept_reason(settings, local)  # as built for the bundled model
    await say(app, "My cat is called Miso")
    out = io.StringIO()
    assert await Repl(app, Console(file=out, width=300)).handle("/save")
    notes = [line for line in out.getvalue().splitlines() if "kept" in line]
    assert notes == [  # once, for both files (before: "REWRITE_FILES is off", twice)
        "the profile and persona were kept as they are: the bundled model's rewrites were "
        "invented text (REWRITE_FILES=auto; REWRITE_FILES=true lets it rewrite them)"
    ]
    await app.aclose()


async def test_retry_with_nothing_said_yet_says_so(env: ModelServer) -> None:
    from test_memory import open_app, say

    from seelen.chat.repl import Repl

    app = await open_app()
    out = io.StringIO()
    repl = Repl(app, Console(file=out, width=200))
    assert await repl.handle("/retry")
    assert "nothing to retry: no message in this session yet" in out.getvalue()
    assert "has an answer" not in out.getvalue()  # (before: on a new profile too)
    await say(app, "hello")
    assert await repl.handle("/retry")
    assert "nothing to retry: the last message has an answer" in out.getvalue()
    assert len(env.chat_requests()) == 1  # nothing was asked again
    await app.aclose()


def test_listings_read_well_at_80_columns(env: ModelServer, data_dir: Path) -> None:
    (data_dir / "default").mkdir(parents=True)
    store = open_store(data_dir)
    sid = store.create_session().session_id
    long = "My sister moved to Lisbon last spring; " + "she loves the tiled facades " * 12
    (turn,) = store.add_turns(sid, [("user", long, None, 1_000)])
    store.add_summary(sid, "We talked about Lisbon: " + "the trams, the river, " * 8, 1, 2)
    store.mark_archived(sid)
    store.close()
    found = run_cli("memory", "search", "Lisbon", env={"COLUMNS": "80"}).stdout.splitlines()
    assert max(len(line.rstrip()) for line in found) <= 80
    at = next(n for n, line in enumerate(found) if f"id {turn.text_id[:12]}" in line)
    hit = [line.split() for line in found[at - 2 : at + 2]]
    assert hit[0][0] == "1" and hit[0][4:7] == ["user", "(words", "+"]  # rank, score, when
    assert hit[1][:2] == ["session", sid[:8]] and hit[2][:2] == ["id", turn.text_id[:12]]
    assert hit[2][-1].endswith("…") and hit[3][0] == "2"  # its text cut at 3 lines, marked
    listed = run_cli("sessions", "list", env={"COLUMNS": "80"}).stdout.splitlines()
    assert len(listed) > 2 and all(line.startswith("    ") for line in listed[1:])  # indented
    assert max(len(line.rstrip()) for line in listed) <= 80
    assert run_cli("persona", "edit", env={"EDITOR": "sed -i s/warm/cold/"}).returncode == 0
    versions = run_cli("persona", "history").stdout.splitlines()
    assert len(versions) == 1 and len(versions[0]) <= 80 and versions[0].endswith("…")


def test_a_recalled_items_copy_changes_only_what_it_names() -> None:
    original = item("turn", {"bm25": 2})
    copy = original.but(rank=3, in_prompt=True)
    assert copy == replace(original, rank=3, in_prompt=True)
    assert (original.rank, original.in_prompt) == (0, False)  # the original is untouched
    with pytest.raises(TypeError, match="rnak"):
        original.but(rnak=3)


def test_an_mcp_server_that_fails_is_one_line_on_stderr_of_ask(
    env: ModelServer, tmp_path: Path
) -> None:
    """`seelen ask` said an MCP server failed through a console of its own, which Rich broke
    at 80 columns: the one line became two in a pipe or a log."""
    config = tmp_path / "mcp_servers.json"
    missing = tmp_path / "a-program-with-a-rather-long-name-that-is-not-installed-here"
    config.write_text(json.dumps({"mcpServers": {"notes": {"command": str(missing)}}}), "utf-8")
    env.enqueue("Still here.")
    result = run_cli("ask", "hello", env={"ENABLE_MCP": "true", "MCP_SERVERS_FILE": str(config)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Still here.\n"
    said = f"MCP server 'notes' failed: command '{missing}' not found"
    assert len(said) > 80 and said + "\n" in result.stderr.splitlines(keepends=True)


def test_hits_in_a_narrow_terminal_keep_their_words_readable() -> None:
    """Under 64 columns the table left a hit's text a column of five characters ("user …"):
    each text now goes under its details, whole lines of it."""
    from seelen.chat.listings import render_hits
    from seelen.protocol.results import MemoryItem, SearchResult

    hit = MemoryItem(
        rank=1,
        text_id="1e6260a09e67456795bbf8bef5a096ee",
        session_id="048d81f51ae04e6dac0e8917d377fe60",
        kind="turn",
        time="2026-11-27T13:30:10.075+00:00",
        role="user",
        text="my cat is called Mimi and she sleeps on the piano",
        score=0.0492,
        rankers={"bm25": 1, "vector": 1},
        in_prompt=True,
    )
    out = io.StringIO()
    render_hits(Console(file=out, width=40), SearchResult(query="cat", turns=[hit]), 10)
    lines = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 40
    said = " ".join(" ".join(lines).split())
    assert "user (words + meaning): my cat is called Mimi and she sleeps on the piano" in said
    assert "session 048d81f5" in said and "id 1e6260a09e67" in said
    # At 30 columns the id broke onto the margin: session and id get a line each.
    out = io.StringIO()
    render_hits(Console(file=out, width=30), SearchResult(query="cat", turns=[hit]), 10)
    lines = out.getvalue().splitlines()
    assert "    session 048d81f5" in lines and "    id 1e6260a09e67" in lines


def test_an_editor_that_fails_is_named_in_words_and_the_file_is_unchanged(data_dir: Path) -> None:
    """The error quoted Python: "Command '['false', '/tmp/tmpk6c4cx_1/persona_memory.txt']'
    returned non-zero exit status 1."."""
    assert run_cli("persona", "edit", env={"EDITOR": "true", "VISUAL": ""}).returncode == 0
    before = run_cli("persona", "show").stdout
    assert before.startswith("I am Seelen")
    for editor, said in (
        ("false", "seelen: the editor 'false' ended with status 1"),
        (
            "/nonexistent/editor",
            "seelen: cannot start the editor '/nonexistent/editor' (No such file or directory)"
            ": set EDITOR",
        ),
    ):
        result = run_cli("persona", "edit", env={"EDITOR": editor, "VISUAL": ""})
        assert result.returncode == 1
        assert result.stderr == f"{said}; persona_memory.txt is unchanged\n"
        assert run_cli("persona", "show").stdout == before
