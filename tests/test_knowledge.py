"""Knowledge folders: a real folder of notes, the real SQLite index, the real watcher."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest
from helpers import context_of, wait_until, wait_until_async
from model_server import ModelServer
from rich.console import Console

from seelen.app import build_app
from seelen.config import load_settings
from seelen.knowledge import Knowledge, NoteFilter
from seelen.knowledge.search import cut_around
from seelen.knowledge.text import terms
from seelen.memory.context import estimate_tokens
from seelen.protocol.events import KnowledgeUsed

# How long a change to the notes may take to reach the index: the watcher's settling time plus
# one re-index, a fraction of a second, many times over on a loaded machine.
REFLECTED = 20.0

# --- a generated novel: characters with profiles, places, chapters; some in Chinese -------

PEOPLE = {
    "Elena Voss": "the harbour master of Port Aldra, stubborn and kind",
    "Tomas Brandt": "a clockmaker who lost his hearing in the war",
    "Mirela Okafor": "a cartographer who maps the drowned coast",
    "Jonah Pike": "a smuggler with a debt to the salt guild",
    "Ilse Marchetti": "a physician who keeps bees on the roof",
    "Piotr Halvorsen": "the old lighthouse keeper of Kestrel Point",
}
PLACES = ["Port Aldra", "Kestrel Point lighthouse", "the salt market", "the glass bridge"]
THINGS = [
    "a brass compass",
    "a torn map",
    "a silver bell",
    "a sealed letter",
    "a broken oar",
    "a jar of honey",
    "a velvet glove",
    "a copper key",
    "a ledger of debts",
    "a green lantern",
    "a whalebone comb",
    "a music box",
]
FILLER = (
    "The wind turned before noon and the gulls went quiet. Somewhere a door banged twice. "
    "Nobody spoke of the weather, because speaking of it made it worse."
)
ZH_PEOPLE = {
    "林小雨": "青石镇的画家，喜欢在雨天画画",
    "陈大海": "渔船的船长，脾气很坏",
    "王秋月": "镇上茶馆的老板娘",
}
ZH_PLACES = ["青石镇的画廊", "东边的码头", "山上的寺庙"]
ZH_THINGS = ["一把旧钥匙", "一封没有署名的信", "一只受伤的白鹤", "一幅未完成的画"]


def slug(name: str) -> str:
    return name.lower().replace(" ", "-")


def chapter_plot(n: int) -> tuple[str, str, str]:
    """(person, place, thing) of English chapter n: each combination is unique."""
    people = list(PEOPLE)
    return people[n % len(people)], PLACES[(n // 2) % len(PLACES)], THINGS[n % len(THINGS)]


def write_novel(root: Path, chapters: int = 36) -> None:
    (root / "characters").mkdir(parents=True)
    (root / "chapters").mkdir()
    for name, about in PEOPLE.items():
        (root / "characters" / f"{slug(name)}.md").write_text(
            f"# {name}\n\n{name} is {about}.\n\n## Habits\n\n{FILLER}\n"
        )
    for n in range(chapters):
        person, place, thing = chapter_plot(n)
        (root / "chapters" / f"chapter-{n:02d}.md").write_text(
            f"# Chapter {n}\n\n{FILLER}\n\n## At {place}\n\n"
            f"{person} walked to {place} at dusk. There, under a loose stone, {person} found "
            f"{thing} and said nothing about it.\n\n{FILLER}\n"
        )
    for i, (name, about) in enumerate(ZH_PEOPLE.items()):
        (root / "characters" / f"zh-{i}.md").write_text(f"# {name}\n\n{name}是{about}。\n")
    for n, thing in enumerate(ZH_THINGS):
        person = list(ZH_PEOPLE)[n % len(ZH_PEOPLE)]
        place = ZH_PLACES[(n + n // 3) % len(ZH_PLACES)]
        (root / "chapters" / f"zh-chapter-{n}.txt").write_text(
            f"第{n + 1}章\n\n那天下午，{person}来到{place}，在角落里发现了{thing}。"
            "她没有告诉任何人。\n"
        )


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "novel"
    write_novel(root)
    return root


@pytest.fixture
def knowledge(notes: Path, tmp_path: Path):
    k = Knowledge([str(notes)], tmp_path / "state")
    k.catch_up()
    yield k
    k.close()


def files_of(passages) -> list[str]:
    return [os.path.basename(p.file) for p in passages]


# --- retrieval -----------------------------------------------------------------------------


def test_a_question_naming_a_character_brings_profile_and_the_right_chapter(knowledge) -> None:
    person, place, thing = chapter_plot(14)  # only chapter 14 has Mirela at the glass bridge
    found = knowledge.search(f"What did {person} find at {place}?", 1200)
    top = files_of(found)[:3]
    assert f"{slug(person)}.md" in top
    assert "chapter-14.md" in top
    chapter = next(p for p in found if p.file.endswith("chapter-14.md"))
    assert thing in chapter.text and chapter.path == os.path.join(
        "novel", "chapters", "chapter-14.md"
    )


def test_a_misspelt_name_still_finds_the_character(knowledge) -> None:
    found = knowledge.search("Who is Mirella Okafur?", 800)
    assert files_of(found)[0] == "mirela-okafor.md"


def test_chinese_question_finds_profile_and_chapter(knowledge) -> None:
    found = knowledge.search("林小雨在东边的码头发现了什么？", 800)
    top = files_of(found)[:3]
    assert "zh-0.md" in top  # 林小雨's profile
    assert "zh-chapter-3.txt" in top  # 林小雨 at 东边的码头 (chapter 4)
    assert "一幅未完成的画" in next(p.text for p in found if p.file.endswith("zh-chapter-3.txt"))


def test_a_bigram_where_two_chinese_words_meet_does_not_outrank_the_name(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(3):
        (root / f"sun-{i}.md").write_text(f"孙平是第{i}个医生。")
    for i in range(4):
        (root / f"later-{i}.md").write_text(f"后来他走了，第{i}次。")
    (root / "garden.md").write_text("和平后院有一棵树。")  # 平后 only where 和平 meets 后院
    k = Knowledge([str(root)], tmp_path / "state")
    k.catch_up()
    assert files_of(k.search("孙平后来怎么样了？", 500))[0].startswith("sun-")
    k.close()


def test_chinese_terms_come_from_the_text_not_a_word_list() -> None:
    assert terms("林小雨 met Élena") == ["林小", "小雨", "met", "elena"]


def test_passages_fit_the_budget_and_name_file_and_heading(knowledge) -> None:
    for budget in (120, 400, 2000):
        found = knowledge.search("Elena Voss Port Aldra lighthouse bell", budget)
        used = sum(estimate_tokens(p.text) + estimate_tokens(p.label()) + 6 for p in found)
        assert found and used <= budget
    profile = knowledge.search("Elena Voss", 400)[0]
    assert profile.label() == os.path.join("novel", "characters", "elena-voss.md") + " › Elena Voss"


def test_a_long_passage_is_cut_around_its_hits() -> None:
    text = " ".join(f"Sentence number {i} is plain." for i in range(200)) + " The dragon sleeps."
    cut = cut_around(text, ["dragon"], 40)
    assert "dragon" in cut and cut.startswith("…") and estimate_tokens(cut) <= 42


def test_words_only_common_in_the_folder_bring_nothing(knowledge) -> None:
    assert knowledge.search("the and of", 500) == []


def test_a_question_sharing_only_function_words_with_a_few_notes_finds_none(
    tmp_path: Path,
) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "harbour.md").write_text("# Harbour\nThe boats come in at dawn. It is busy today.")
    (root / "bread.md").write_text("# Bread\nHow to make bread: mix flour and water, then bake.")
    (root / "trip.md").write_text("# 旅行\n我们去了北京，长城非常壮观。")
    (root / "cat.md").write_text("# 猫\n我的猫叫小雨，它喜欢睡觉。")
    k = Knowledge([str(root)], tmp_path / "state")
    k.catch_up()
    # In four notes "is", "how" and "today" are rare enough to weigh: every note came back.
    for question in ("how is the weather today", "what is it?", "我们的呢？", "它是什么？"):
        assert k.search(question, 500) == [], question
    assert files_of(k.search("when do the boats come in?", 500)) == ["harbour.md"]
    assert files_of(k.search("小雨喜欢什么？", 500)) == ["cat.md"]
    k.close()


# --- what is a note ------------------------------------------------------------------------


def test_links_out_of_the_folder_hidden_and_oversized_files_never_appear(tmp_path: Path) -> None:
    root, outside = tmp_path / "notes", tmp_path / "private"
    (root / ".git").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("The zebrafish password is hunter2.")
    (root / "inner.md").write_text("A zebrafish swims in the pond.")
    os.symlink(outside / "secret.md", root / "link.md")
    os.symlink(outside, root / "linked-folder")
    os.symlink(root / "inner.md", root / "inside-link.md")  # stays inside: allowed
    (root / ".git" / "zebra.md").write_text("zebrafish in a hidden folder")
    (root / ".hidden.md").write_text("zebrafish in a hidden file")
    (root / "huge.md").write_text("zebrafish " * 200)
    (root / "notes.rst").write_text("zebrafish in the wrong format")
    k = Knowledge([str(root)], tmp_path / "state", NoteFilter(("*.md",), max_bytes=1000))
    k.catch_up()
    found = k.search("zebrafish password", 2000)
    assert sorted(files_of(found)) == ["inner.md", "inside-link.md"]
    assert all("hunter2" not in p.text for p in found)
    k.close()


def test_a_damaged_index_is_rebuilt_from_the_notes(notes: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "index.db").write_bytes(b"not a database at all" * 100)
    k = Knowledge([str(notes)], state)
    assert k.catch_up().indexed == 49
    assert files_of(k.search("Elena Voss", 300))[0] == "elena-voss.md"
    k.close()


def test_index_files_are_private(knowledge, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "index.db").stat().st_mode) == 0o600


# --- keeping the index current --------------------------------------------------------------


def test_watcher_reflects_edit_new_and_deleted_files(notes: Path, tmp_path: Path) -> None:
    k = Knowledge([str(notes)], tmp_path / "state")
    k.start()
    assert k.wait_ready(20)
    profile = notes / "characters" / "jonah-pike.md"
    profile.write_text("# Jonah Pike\n\nJonah Pike now keeps a tame albatross named Wendel.\n")
    wait_until(
        lambda: "albatross" in " ".join(p.text for p in k.search("albatross Wendel", 500)),
        REFLECTED,
        "an edited note is not found by its new words",
    )
    (notes / "chapters" / "epilogue.md").write_text("# Epilogue\n\nThe quokka festival ended.\n")
    wait_until(
        lambda: "epilogue.md" in files_of(k.search("quokka festival", 500)),
        REFLECTED,
        "a new note is not found",
    )
    profile.unlink()
    wait_until(
        lambda: k.search("albatross Wendel", 500) == [], REFLECTED, "a deleted note is still found"
    )
    assert "jonah-pike.md" not in files_of(k.search("Jonah Pike smuggler", 2000))
    moved = tmp_path / "appendix"
    moved.mkdir()
    (moved / "maps.md").write_text("# Maps\n\nThe archipelago of Quillon.\n")
    moved.rename(notes / "appendix")  # a whole folder moved in
    wait_until(
        lambda: files_of(k.search("Quillon archipelago", 500)) == ["maps.md"],
        REFLECTED,
        "a folder moved in is not found",
    )
    (notes / "appendix").rename(tmp_path / "gone")  # and out again
    wait_until(
        lambda: k.search("Quillon archipelago", 500) == [],
        REFLECTED,
        "a folder moved out is still found",
    )
    k.close()


def test_changes_made_while_not_running_are_caught_up_on_start(notes: Path, tmp_path: Path) -> None:
    Knowledge([str(notes)], tmp_path / "state").catch_up()
    (notes / "characters" / "ilse-marchetti.md").write_text(
        "# Ilse Marchetti\n\nShe moved to Lyon."
    )
    (notes / "characters" / "tomas-brandt.md").unlink()
    (notes / "new.md").write_text("The narwhal parade.")
    k = Knowledge([str(notes)], tmp_path / "state")
    progress = k.catch_up()
    assert progress.indexed == 2 and progress.dropped == 1  # only what changed is read again
    assert "Lyon" in k.search("Ilse Marchetti", 500)[0].text
    assert "tomas-brandt.md" not in files_of(k.search("Tomas Brandt clockmaker", 2000))
    assert k.index.doc_freq("clockmaker") == 0  # its terms left the index, not just its text
    assert k.index.doc_freq("lyon") == 1
    assert files_of(k.search("narwhal", 500)) == ["new.md"]
    k.close()
    other = tmp_path / "other"
    other.mkdir()
    k = Knowledge([str(other)], tmp_path / "state")  # the novel's folder was removed
    assert k.catch_up().dropped == 49 and k.index.chunk_count() == 0
    k.close()


# --- in the product -------------------------------------------------------------------------


async def test_each_turn_brings_notes_into_the_prompt_and_follows_edits(
    env: ModelServer, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNOWLEDGE_DIRS", str(notes))
    app = build_app(load_settings())
    await app.open_session()
    assert "knowledge_search" in app.tools.names()
    env.enqueue("She maps the coast.", "She retired.")
    events = [e async for e in app.bot.turn("Tell me about Mirela Okafor")]
    used = next(e for e in events if isinstance(e, KnowledgeUsed))
    assert any("mirela-okafor.md" in note for note in used.notes)
    system = context_of(env.chat_requests()[-1])
    assert "cartographer who maps the drowned coast" in system
    profile = notes / "characters" / "mirela-okafor.md"
    profile.write_text("# Mirela Okafor\n\nMirela Okafor retired to breed goats.\n")
    await wait_until_async(
        lambda: "goats" in " ".join(p.text for p in app.knowledge.search("Mirela", 500)),
        REFLECTED,
        "the edited note is not found by its new words",
    )
    [e async for e in app.bot.turn("And Mirela Okafor now?")]
    system = context_of(env.chat_requests()[-1])
    assert "breed goats" in system and "drowned coast" not in system
    await app.aclose()


async def test_repl_shows_used_files_and_searches_by_hand(
    env: ModelServer, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seelen.chat.repl import Repl

    monkeypatch.setenv("KNOWLEDGE_DIRS", str(notes))
    out = io.StringIO()
    app = build_app(load_settings())
    repl = Repl(app, Console(file=out, force_terminal=False, width=200))
    await repl.start()
    env.enqueue("A cartographer.")
    await repl.run_lines(["Who is Mirela Okafor?\n", "/files\n", "/knowledge salt guild\n"])
    text = out.getvalue()
    label = os.path.join("novel", "characters", "mirela-okafor.md") + " › Mirela Okafor"
    assert f"used: {label}" in text
    assert text.count(label) >= 2  # the dim line and /files
    assert "jonah-pike.md" in text  # /knowledge found the smuggler's debt to the salt guild
    await app.aclose()


def test_knowledge_commands_manage_the_profile_list(notes: Path, data_dir: Path) -> None:
    from helpers import run_cli

    added = run_cli("knowledge", "add", str(notes))
    assert added.returncode == 0, added.stderr
    assert "49 notes indexed" in added.stdout  # at once (before: 0 until the first search)
    assert str(notes) in (data_dir / "default" / "knowledge_folders.json").read_text()
    listed = run_cli("knowledge", "list")
    assert f"{notes}  (profile, 49 notes indexed)" in listed.stdout
    found = run_cli("knowledge", "search", "Piotr Halvorsen lighthouse keeper")
    assert "piotr-halvorsen.md" in found.stdout
    assert run_cli("knowledge", "remove", str(notes)).returncode == 0
    assert "no knowledge folder" in run_cli("knowledge", "list").stdout
    # Added again: its notes are in the index already (it said "0 notes indexed").
    assert run_cli("knowledge", "add", str(notes)).stdout.endswith("49 notes indexed\n")


async def test_ask_names_the_notes_it_used_on_stderr(
    env: ModelServer, notes: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from seelen.cli.answer import AnswerPrinter
    from seelen.cli.oneshot import answer_once

    monkeypatch.setenv("KNOWLEDGE_DIRS", str(notes))
    app = build_app(load_settings())
    app.sessions.peek()
    env.enqueue("He keeps bees? No, that is Ilse.")
    printer = AnswerPrinter(as_json=False, ephemeral=True)
    assert await answer_once(app, "Who is Piotr Halvorsen?", printer, ephemeral=True) == 0
    captured = capsys.readouterr()
    assert "used: " + os.path.join("novel", "characters", "piotr-halvorsen.md") in captured.err
    assert "used:" not in captured.out
    await app.aclose()


def test_knowledge_search_refuses_an_empty_query_or_budget_and_says_when_nothing_is_found(
    tmp_path: Path, data_dir: Path
) -> None:
    """An empty query, `--tokens 0` and a query that matched nothing all printed nothing,
    with exit code 0: the first two are usage errors, the last says so."""
    from helpers import run_cli

    notes = tmp_path / "trip"
    notes.mkdir()
    (notes / "oslo.md").write_text("# Trip\nWe go to Oslo in May.\n", "utf-8")
    assert run_cli("knowledge", "add", str(notes)).returncode == 0
    for args in (("",), ("   ",), ("Oslo", "--tokens", "0")):
        result = run_cli("knowledge", "search", *args)
        assert result.returncode == 2 and result.stdout == "", (args, result.stderr)
    assert "oslo.md" in run_cli("knowledge", "search", "Oslo").stdout
    missing = run_cli("knowledge", "search", "zeppelin")
    assert (missing.returncode, missing.stdout) == (0, "Nothing found.\n")
    assert run_cli("memory", "search", "   ").returncode == 2


def test_a_file_that_is_not_text_is_skipped_and_named(tmp_path: Path, data_dir: Path) -> None:
    """A binary file named *.md (a photo saved under a note's name) was decoded as GB18030 or
    with replacement characters and indexed as text: its garbage came back as passages."""
    import random

    from helpers import run_cli

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "cat.md").write_text("# Mimi\nMy cat Mimi sleeps on the piano.\n", "utf-8")
    (folder / "gb.md").write_bytes("# 猫\n我的猫叫咪咪，她睡在钢琴上。\n".encode("gb18030"))
    noise = random.Random(7).randbytes(6000).replace(b"\0", b"\x01")  # no NUL to give it away
    (folder / "photo.md").write_bytes(noise)
    (folder / "latin1.txt").write_bytes("café crème\x07\x08\x02\x03\x04".encode("latin-1") * 50)
    added = run_cli("knowledge", "add", str(folder))
    assert added.returncode == 0, added.stderr
    assert added.stdout.endswith("2 notes indexed\n")
    [said] = [line for line in added.stderr.splitlines() if line.startswith("skipped")]
    head, names = said.split(": ")
    assert head == "skipped 2 files that are not text"
    assert sorted(names.split(", ")) == ["notes/latin1.txt", "notes/photo.md"]
    assert run_cli("knowledge", "list").stdout.endswith("(profile, 2 notes indexed)\n")
    found = run_cli("knowledge", "search", "猫 咪咪")
    assert "gb.md" in found.stdout and "photo.md" not in found.stdout


def test_every_shipped_note_reads_as_text(notes: Path) -> None:
    """The control-character limit of `as_text` keeps every note of the tests' novel."""
    from seelen.knowledge.files import as_text

    files = [p for p in notes.rglob("*") if p.is_file()]
    assert len(files) >= 49 and all(as_text(p.read_bytes()) is not None for p in files)
