"""What a demanding user met in the knowledge folders, `seelen mcp` and imports: each fault
as one clear line, nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import open_store, run_cli
from model_server import ModelServer

from seelen.config import load_settings
from seelen.protocol import calls
from seelen.runtime import open_writer
from seelen.service import writing


def test_an_id_longer_than_any_is_not_found_not_a_damaged_database(data_dir: Path) -> None:
    """A pasted text as the id (`memory forget`, `sessions show`, MCP `forget`) passed SQLite's
    limit on a LIKE pattern: "cannot use …/chat_sessions.db: LIKE or GLOB pattern too
    complex", as if the memory were damaged; the line also echoed all 60,000 characters."""
    assert run_cli("ask", "--ephemeral", "hello").returncode in (0, 1)
    pasted = "a" * 60_000
    for args, said in (
        (("memory", "forget", pasted), "no memory has the id 'aaaa"),
        (("memory", "forget", "--session", pasted), "no session starts with 'aaaa"),
        (("sessions", "show", pasted), "no session starts with 'aaaa"),
    ):
        result = run_cli(*args)
        assert result.returncode == 1, result.stderr
        assert said in result.stderr and "(60,000 characters)" in result.stderr, result.stderr
        assert "LIKE" not in result.stderr and len(result.stderr) < 300, result.stderr[:300]


async def test_mcp_forget_of_a_pasted_text_says_no_memory_has_it(data_dir: Path) -> None:
    """The MCP `forget` tool looks the id up before forgetting: the same fault, the same line."""
    app = await open_writer(load_settings(), role="ask", with_model=False, start_indexer=False)
    try:
        kept = writing.remember(app, calls.Remember(text="my cat is called Mimi", client="mcp"))
        try:
            writing.forget(app, calls.Forget(text_id=kept.text_id + "0" * 60_000))
        except Exception as exc:
            said = str(exc)
        else:
            raise AssertionError("forgot an id no memory has")
    finally:
        await app.aclose()
    assert said.startswith("no memory has the id") and "LIKE" not in said, said[:200]
    store = open_store(data_dir)
    assert store.find_text_ids(kept.text_id) == [kept.text_id]  # nothing lost
    store.close()


def test_a_note_over_the_size_limit_is_named_not_silently_left_out(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note over KNOWLEDGE_MAX_BYTES was left out without a word: `knowledge add` said
    "1 note indexed" and a search for its words said "Nothing found.", with no reason."""
    monkeypatch.setenv("KNOWLEDGE_MAX_BYTES", "1000")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "small.md").write_text("The tomatoes grow on the south wall.\n", "utf-8")
    (folder / "journal.md").write_text("zeppelin rides over the bay\n" * 100, "utf-8")
    (folder / "photo.jpg").write_bytes(b"\xff" * 5000)  # no note's name: not a note at all
    for args in (("knowledge", "add", str(folder)), ("knowledge", "search", "zeppelin")):
        result = run_cli(*args)
        assert result.returncode == 0, result.stderr
        said = "skipped 1 file over the size limit (KNOWLEDGE_MAX_BYTES, 1,000 bytes)"
        assert result.stderr.splitlines() == [f"{said}: notes/journal.md"], result.stderr
    assert run_cli("knowledge", "list").stdout.endswith("(profile, 1 note indexed)\n")


def test_a_long_paragraph_without_a_sentence_end_is_cut_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A note of one long paragraph with no sentence end (a log, a word list, a transcript
    without punctuation) was cut by estimating the whole rest of it for every chunk: 13 s of
    CPU for a 1.9 MB note, 111 s for 5.6 MB, while the chat's notes waited. The work is
    counted in characters estimated, not timed: it stays a small multiple of the text."""
    import seelen.knowledge.text as text_module
    from seelen.memory.context import estimate_tokens

    estimated = 0

    def counting(text: str) -> int:
        nonlocal estimated
        estimated += len(text)
        return estimate_tokens(text)

    paragraph = " ".join(["river stone cloud"] * 20_000)  # 360,000 characters, no "."
    expected = text_module.chunks(paragraph, True)
    monkeypatch.setattr(text_module, "estimate_tokens", counting)
    pieces = text_module.chunks(paragraph, True)
    assert pieces == expected and len(pieces) > 300
    assert all(estimate_tokens(p.text) <= text_module.CHUNK_TOKENS for p in pieces)
    assert "".join(p.text for p in pieces) == paragraph  # nothing lost at the hard cuts
    assert estimated <= 20 * len(paragraph), estimated / len(paragraph)  # it was 387 times


def test_knowledge_add_of_an_empty_path_adds_nothing(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`seelen knowledge add "$NOTES"` with NOTES unset added the folder the shell was in
    (often the home folder, every file of it read as notes); remove "" removed it."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "diary.md").write_text("A private diary entry.\n", "utf-8")
    monkeypatch.chdir(home)
    assert run_cli("knowledge", "add", str(home)).returncode == 0
    for command in ("add", "remove"):
        result = run_cli("knowledge", command, "")
        assert result.returncode == 2 and result.stdout == "", result
        assert "it is empty: name a folder of notes" in result.stderr, result.stderr
    assert run_cli("knowledge", "list").stdout.startswith(f"{home}  (profile, 1 note")
    assert run_cli("knowledge", "remove", str(home)).returncode == 0
    assert run_cli("knowledge", "add", " ").returncode == 2
    listed = run_cli("knowledge", "list")
    assert listed.stdout.startswith("no knowledge folder"), listed.stdout


def test_a_western_note_in_windows_1252_is_read_as_written(tmp_path: Path, data_dir: Path) -> None:
    """A note saved as Windows-1252 (Notepad's "ANSI", Latin-1) was read as GB18030 when each
    accented letter had a letter after it ("crème brûlée" indexed as "cr鑝e br鹟閑", never
    found by its words), and skipped as "not text" when a space came after one ("café")."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "dessert.md").write_bytes("La crème brûlée était délicieuse.\n".encode("cp1252"))
    (folder / "cafe.txt").write_bytes("Un café au lait, s'il vous plaît.\n".encode("cp1252"))
    (folder / "cat.md").write_bytes("我的猫叫咪咪，她睡在钢琴上。\n".encode("gb18030"))
    added = run_cli("knowledge", "add", str(folder))
    assert added.returncode == 0 and added.stderr == "", added.stderr
    assert added.stdout.endswith("3 notes indexed\n")
    for query, line in (
        ("crème brûlée", "La crème brûlée était délicieuse."),
        ("café", "Un café au lait, s'il vous plaît."),
        ("咪咪", "我的猫叫咪咪，她睡在钢琴上。"),
    ):
        found = run_cli("knowledge", "search", query)
        assert line in found.stdout, (query, found.stdout)


def _chatgpt_conversation(key: str, words: str | None) -> dict[str, object]:
    """A ChatGPT conversation of one user message; `words` None: its tree left out."""
    item: dict[str, object] = {"conversation_id": key, "id": key, "title": key}
    item["create_time"] = 1_700_000_000
    if words is not None:
        message = {
            "id": "m",
            "author": {"role": "user"},
            "create_time": 1_700_000_001,
            "content": {"content_type": "text", "parts": [words]},
        }
        item["mapping"] = {"m": {"id": "m", "message": message, "parent": None, "children": []}}
        item["current_node"] = "m"
    return item


@pytest.mark.parametrize("first_has_no_tree", [False, True])
def test_a_chatgpt_conversation_without_its_tree_does_not_refuse_the_others(
    tmp_path: Path, data_dir: Path, first_has_no_tree: bool
) -> None:
    """One conversation of a ChatGPT export without its message tree (`mapping` left out or
    null) refused the whole export: "conversation 2 has no message tree (mapping)", or,
    when it came first, "a JSON list, but not ChatGPT's or Claude's conversations"."""
    import json

    good = _chatgpt_conversation("good", "my bike is a blue Gazelle")
    bare = _chatgpt_conversation("bare", None)
    nulled = {**_chatgpt_conversation("nulled", None), "mapping": None}
    items = [bare, good, nulled] if first_has_no_tree else [good, bare, nulled]
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(items), "utf-8")
    result = run_cli("import", str(export))
    assert result.returncode == 0, result.stderr
    assert "(3 conversations in the export, 2 with nothing to keep)" in result.stderr
    found = run_cli("memory", "search", "Gazelle", "--json")
    assert "my bike is a blue Gazelle" in found.stdout, found.stdout


def test_ctrl_c_while_import_wait_embeds_through_the_owner_says_what_goes_on(
    owner_env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    """Ctrl-C on `import --wait`'s embedding bar (the owner embeds) left exit 130 without a
    word: whether the import was kept, and whether the embedding went on, went unsaid."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from seelen.cli.imports import STOPPED_WAITING_FOR_VECTORS

    # 100 conversations of 5 messages: 600 texts, seconds of embedding (~140 a second), which
    # the Ctrl-C (a user's, a moment after the import is done) comes well inside.
    words = "river stone cloud garden pier bike forest ocean".split()
    items = [
        _chatgpt_conversation(f"c{c}", " ".join(words[(c + i) % 8] for i in range(30)))
        for c in range(100)
    ]
    for c, item in enumerate(items):
        item["mapping"] = {
            f"m{i}": {
                "id": f"m{i}",
                "parent": f"m{i - 1}" if i else None,
                "children": [f"m{i + 1}"] if i < 4 else [],
                "message": {
                    "id": f"{c}-{i}",
                    "author": {"role": "user" if i % 2 == 0 else "assistant"},
                    "create_time": 1_700_000_000 + c * 60 + i,
                    "content": {"content_type": "text", "parts": [f"{c} {i} {words[i]}"]},
                },
            }
            for i in range(5)
        }
        item["current_node"] = "m4"
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(items), "utf-8")
    importer = subprocess.Popen(
        [sys.executable, "-m", "seelen", "import", "--wait", str(export)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert importer.stderr is not None
        said: list[str] = []
        while not said or "Keyword search finds them now." not in said[-1]:
            said.append(importer.stderr.readline())
            assert said[-1], said
        time.sleep(0.3)  # a user's reaction: the command is past its line, waiting
        importer.send_signal(signal.SIGINT)
        out, err = importer.communicate(timeout=60)
    finally:
        if importer.poll() is None:
            importer.kill()
    assert importer.returncode == 130 and out == "", err
    assert STOPPED_WAITING_FOR_VECTORS in err.replace("\n", "") and "Traceback" not in err
    store = open_store(data_dir)
    assert store.count_turns() == 500  # every text is kept
    store.close()


@pytest.mark.parametrize(
    ("args", "content"),
    [
        (("--from", "chatgpt"), "[]"),
        (("--from", "claude"), "[]"),
        ((), '{"conversations": []}'),
        (("--from", "claude"), '{"conversations": []}'),
    ],
)
def test_an_export_of_no_conversations_is_nothing_to_import_whatever_from_says(
    tmp_path: Path, data_dir: Path, args: tuple[str, ...], content: str
) -> None:
    """With --from, an empty list was "Imported 0 turns in 0 new sessions from  (0
    conversations in the export)." under an empty progress bar; Claude's wrapped list of
    none was "not a Seelen export (no list of sessions)"."""
    export = tmp_path / "conversations.json"
    export.write_text(content, "utf-8")
    for result in (
        run_cli("import", *args, str(export)),
        run_cli("import", *args, "-", stdin=content),
    ):
        assert result.returncode == 0, result.stderr
        said = result.stdout + result.stderr
        assert said == "Nothing to import: the export holds no conversations.\n", said


def test_an_export_saved_with_a_byte_order_mark_is_imported(
    env: ModelServer, tmp_path: Path, data_dir: Path
) -> None:
    """A `seelen export` file opened and saved again in an editor that writes a UTF-8 byte
    order mark (Windows Notepad) was "not JSON, or cut short (Unexpected UTF-8 BOM …)"; a
    list of conversations with one was read, since the stream skips it."""
    remembered = run_cli("ask", "my bike is a blue Gazelle")
    export = tmp_path / "seelen.json"
    assert run_cli("export", "-o", str(export)).returncode == 0, remembered.stderr
    export.write_bytes(b"\xef\xbb\xbf" + export.read_bytes())
    result = run_cli("--profile", "other", "import", str(export))
    assert result.returncode == 0, result.stderr
    found = run_cli("--profile", "other", "memory", "search", "Gazelle", "--json")
    assert "my bike is a blue Gazelle" in found.stdout, found.stdout


def test_a_knowledge_folder_moved_away_while_watched_is_no_longer_found(tmp_path: Path) -> None:
    """A knowledge folder itself renamed while a chat ran (no watcher event says so) stayed
    searchable: /knowledge gave its notes at paths that no longer existed, and the model
    was told of them. Moved back, its notes are found again."""
    from seelen.knowledge.library import Knowledge

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "boat.md").write_text("The boat is moored at pier seven.\n", "utf-8")
    knowledge = Knowledge([str(notes)], tmp_path / "state")
    knowledge.start()
    try:
        assert knowledge.wait_ready(20)
        assert [p.path for p in knowledge.search("boat pier", 500)] == ["notes/boat.md"]
        notes.rename(tmp_path / "notes.old")
        assert knowledge.search("boat pier", 500) == []
        (tmp_path / "notes.old").rename(notes)
        assert [p.path for p in knowledge.search("boat pier", 500)] == ["notes/boat.md"]
    finally:
        knowledge.close()
