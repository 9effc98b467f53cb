"""The vector index can always be rebuilt from SQLite: kills, damage and drift are repaired.

Real SQLite and LanceDB in a temporary folder; the embedder is a fast word hash (helpers).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import HashEmbedder

from seelen.memory.indexer import Indexer, measure
from seelen.memory.recall import Recall
from seelen.store import Store
from seelen.vectors import VectorIndex, VectorRow
from seelen.vectors.tables import connect

WORDS = "tea harbour violin lisbon cactus kayak ramen comet lantern pebble".split()


def fill(store: Store, sessions: int, turns: int) -> None:
    """Archived sessions of user/assistant turns, each with a summary."""
    for s in range(sessions):
        session = store.create_session("archived")
        rows = [
            ("user" if t % 2 == 0 else "assistant", f"{WORDS[(s + t) % 10]} talk {s}-{t}", None, t)
            for t in range(turns)
        ]
        store.add_turns(session.session_id, rows)
        store.add_summary(session.session_id, f"a chat about {WORDS[s % 10]}", 0, turns)


def opened(tmp_path: Path) -> tuple[Store, VectorIndex, Indexer]:
    store = Store(tmp_path / "chat_sessions.db")
    index = VectorIndex(tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim)
    return store, index, Indexer(store, index, HashEmbedder(), batch=20)


def assert_one_vector_per_text(store: Store, index: VectorIndex) -> None:
    for kind in ("turns", "summaries"):
        drift = measure(store, index, kind)
        assert drift.ok and drift.pending == 0, drift.describe()
        assert drift.vectors == drift.texts > 0


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Store, VectorIndex, Indexer]:
    store, index, indexer = opened(tmp_path)
    fill(store, sessions=4, turns=10)
    indexer.index_all()
    assert_one_vector_per_text(store, index)
    return store, index, indexer


def test_a_new_profiles_pass_and_search_leave_the_vector_folder_unmade(tmp_path: Path) -> None:
    """Nothing stored yet (a new user): the indexer's first pass (repair, graphs) and a
    recall find no table without opening LanceDB (loading it: 0.4 s of CPU), so no folder
    is made; the first text makes it."""
    store, index, indexer = opened(tmp_path)
    assert indexer.index_all() == 0
    assert indexer.index.build_missing_graphs() == []
    recall = Recall(store, index, HashEmbedder())
    assert recall.search("anything", None).turns == []
    assert not (tmp_path / "lancedb").exists()
    fill(store, sessions=1, turns=2)
    assert indexer.index_all() == 3
    assert_one_vector_per_text(store, index)


def test_a_long_pass_frees_the_model_before_the_index_upkeep_at_its_end(tmp_path: Path) -> None:
    store = Store(tmp_path / "chat_sessions.db")
    index = VectorIndex(tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim)

    class Recording(HashEmbedder):
        """Notes, at each release, how many bulk passes of the index were still open."""

        def __init__(self) -> None:
            self.open_passes: list[int] = []

        def release(self) -> None:
            self.open_passes.append(index._bulk)

    embedder = Recording()
    fill(store, sessions=4, turns=10)  # 44 texts: more than a batch of 20, one bulk pass
    Indexer(store, index, embedder, batch=20).index_all()
    assert embedder.open_passes == [1]  # released inside the pass, before its upkeep
    assert_one_vector_per_text(store, index)
    Indexer(store, index, embedder, batch=20).rebuild()
    assert len(embedder.open_passes) == 2
    assert_one_vector_per_text(store, index)


# -- kills during a re-index: real processes, SIGKILL ------------------------------------

REBUILD = """
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from helpers import HashEmbedder
from seelen.memory.indexer import Indexer
from seelen.store import Store
from seelen.vectors import VectorIndex
path = Path(sys.argv[1])
store = Store(path / "chat_sessions.db")
index = VectorIndex(path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim)
def progress(done, total):
    print(done, total, flush=True)
Indexer(store, index, HashEmbedder(), batch=20).rebuild(progress)
print("swapped", flush=True)
"""


@pytest.mark.parametrize("kill_after", [2, 8])  # mid-way; around the swap (8 batches)
def test_a_kill_during_reindex_leaves_every_text_with_one_vector(
    tmp_path: Path, kill_after: int
) -> None:
    store, index, indexer = opened(tmp_path)
    fill(store, sessions=3, turns=50)  # 150 turns + 3 summaries = 8 batches of 20
    indexer.index_all()
    store.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", REBUILD, str(tmp_path), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for _ in range(kill_after):
        assert proc.stdout.readline(), "the re-index ended early"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store, index, indexer = opened(tmp_path)
    assert index.count("turns") == 150  # the live vectors served recall all along
    indexer.index_all()
    assert_one_vector_per_text(store, index)
    assert not (tmp_path / "lancedb.new").exists()


def test_a_rebuild_is_swapped_in_only_when_complete(indexed, tmp_path: Path) -> None:
    store, index, indexer = indexed
    seen, shown = [], []

    def progress(done: int, total: int) -> None:
        seen.append(index.count("turns"))
        shown.append(indexer.status())

    indexer.rebuild(progress)
    assert seen and all(n == 40 for n in seen)  # old vectors stayed searchable throughout
    assert shown[0] == "re-indexing memory 20/44" and indexer.status() == ""
    assert_one_vector_per_text(store, index)
    assert [p.name for p in tmp_path.glob("lancedb*")] == ["lancedb"]  # nothing left over


def test_a_swap_cut_short_by_a_crash_is_finished_on_open(indexed, tmp_path: Path) -> None:
    store, index, indexer = indexed
    staged = index.staging()
    items = store.indexable("turns", 0, 100)[1]
    indexer._add(staged, "turns", list(zip(items, indexer._vectors("turns", items), strict=True)))
    (staged.path / "seelen_complete").touch()
    (tmp_path / "lancedb").rename(tmp_path / "lancedb.old-20260101T000000")  # crash here
    store, index, indexer = opened(tmp_path)
    indexer.index_all()
    assert index.count("turns") == 40 and not (tmp_path / "lancedb.new").exists()
    assert not list(tmp_path.glob("lancedb.old-*"))
    assert_one_vector_per_text(store, index)


# -- damage: moved aside (never deleted), rebuilt, and never a failed recall ------------


def no_manifests(path: Path) -> None:
    for versions in path.glob("*.lance/_versions"):
        shutil.rmtree(versions)


def garbage_data(path: Path) -> None:
    for data in path.glob("*.lance/data/*"):
        data.write_bytes(b"not a lance file" * 4)


def replaced_by_a_file(path: Path) -> None:
    shutil.rmtree(path)
    path.write_text("oops")


def deleted(path: Path) -> None:
    shutil.rmtree(path)


def garbage_record(path: Path) -> None:
    (path / "seelen_vectors.json").write_text("{not json")


@pytest.mark.parametrize(
    "damage", [no_manifests, garbage_data, replaced_by_a_file, deleted, garbage_record]
)
def test_a_damaged_index_degrades_recall_then_is_rebuilt(indexed, tmp_path: Path, damage) -> None:
    store, _, _ = indexed
    damage(tmp_path / "lancedb")
    store, index, indexer = opened(tmp_path)
    recall = Recall(store, index, HashEmbedder(), session_num=2, conv_num=3)
    result = recall.search("lisbon", None)  # keywords still find it, nothing raises
    assert result.turns and all("lisbon" in t.text for t in result.turns)
    if damage in (no_manifests, garbage_data):
        assert result.notice.startswith("recall used keywords only: vector index")
        assert recall.search("lisbon", None).notice == ""  # told once, not every turn
    indexer.index_all()
    assert_one_vector_per_text(store, index)
    if damage is not deleted:  # what was there is kept for inspection, renamed
        assert len(index.aside()) == 1 or damage is garbage_record
    hits = recall.search("lisbon talk 0-3", None, mode="vector").turns
    best = [h.text for h in hits if h.sources.get("vector") == 1]
    assert best == ["lisbon talk 0-3"]  # found by its vector again


def test_damage_found_while_indexing_is_repaired(indexed, tmp_path: Path) -> None:
    store, index, indexer = indexed
    garbage_data(tmp_path / "lancedb")
    session = store.create_session()
    store.add_turn(session.session_id, "user", "a new comet sighting")
    indexer.index_all()  # the first repair already ran: damage shows on the write
    assert_one_vector_per_text(store, index)
    assert len(index.aside()) == 1 and "damaged" in indexer.repairs[-1]


def test_a_failing_write_on_a_readable_index_is_not_taken_for_damage(indexed) -> None:
    store, index, indexer = indexed
    store.add_turn(store.create_session().session_id, "user", "x")
    index.dim = 7  # every new vector is refused, though the stored ones read fine
    with pytest.raises(ValueError):
        indexer.index_all()
    assert index.aside() == [] and index.count("turns") == 40


# -- drift between SQLite and the index ----------------------------------------------


def test_drift_is_measured_and_repaired(indexed, tmp_path: Path) -> None:
    store, index, _ = indexed
    turn_ids = list(store.index_flags("turns"))
    index.delete("turns", text_ids=turn_ids[:5])  # indexed in SQLite, vector gone
    index.add("turns", [VectorRow("ghost", "s", 0, np.ones(16))])  # vector, no text
    db = connect(tmp_path / "lancedb")  # a crash mid-move: one text in both tables
    db.create_table("turns", index._table("turns_recent").search().limit(3).to_arrow())
    fresh = VectorIndex(tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim)
    drift = measure(store, fresh, "turns")
    assert (len(drift.missing), drift.orphans, len(drift.duplicates)) == (5, ("ghost",), 3)
    assert not drift.ok and "5 indexed texts without a vector" in drift.describe()
    assert Indexer(store, fresh, HashEmbedder()).index_all() == 8  # 5 missing + 3 duplicated
    assert_one_vector_per_text(store, fresh)


# -- the user's view: `seelen ask` on a damaged index --------------------------------------


def test_ask_answers_on_a_damaged_index_and_repairs_it(env, data_dir: Path) -> None:
    from helpers import open_store, run_cli

    from seelen.models.embed import LOCAL_DIM, LOCAL_MODEL

    profile = data_dir / "default"
    profile.mkdir(parents=True, mode=0o700)
    store = open_store(data_dir)
    fill(store, sessions=2, turns=6)
    index = VectorIndex(profile / "lancedb", f"local:{LOCAL_MODEL}", LOCAL_DIM)
    flags = store.index_flags("turns")
    rng = np.random.default_rng(1)
    index.add("turns", [VectorRow(i, "s", 0, rng.random(LOCAL_DIM)) for i in flags])
    store.mark_indexed(flags)
    store.close()
    no_manifests(profile / "lancedb")  # as a kill while a table is half created leaves it
    env.enqueue("Lisbon, yes.")
    result = run_cli("ask", "what about lisbon?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Lisbon, yes.\n"
    assert "recall used keywords only" in result.stderr
    assert "lisbon talk" in str(env.chat_requests()[-1])  # keywords recalled it
    store = open_store(data_dir)
    assert store.count_unindexed() == 0  # re-indexed after the answer
    assert len(list(profile.glob("lancedb.damaged-*"))) == 1
    assert_one_vector_per_text(store, VectorIndex(profile / "lancedb", index.model_id, LOCAL_DIM))


def test_recall_keeps_answering_while_the_index_is_swapped(indexed) -> None:
    import threading

    store, index, indexer = indexed
    recall = Recall(store, index, HashEmbedder(), session_num=2, conv_num=3)
    errors: list[BaseException] = []
    found: list[int] = []
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            try:
                found.append(len(recall.search("lisbon talk", None).turns))
            except BaseException as exc:  # any escape would fail a user's turn
                errors.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    try:
        for _ in range(3):
            indexer.rebuild()
            index.move_aside()
            indexer.repair()
            indexer.index_all()
    finally:
        done.set()
        thread.join()
    assert errors == [] and found and min(found) > 0
    assert_one_vector_per_text(store, index)


def test_forgetting_on_a_damaged_index_fails_nothing_and_is_finished_by_repair(
    indexed, tmp_path: Path
) -> None:
    store, index, indexer = indexed
    session = store.sessions_with_status("archived")[0].session_id
    garbage_data(tmp_path / "lancedb")
    indexer.forget(store.delete_session(session))  # e.g. /reset, or ask --ephemeral
    assert "keep a vector until repaired" in (indexer.error or "")
    indexer.index_all()
    assert_one_vector_per_text(store, index)  # none left for the forgotten texts
    assert store.get_session(session) is None


def test_the_background_indexer_builds_a_graph_the_index_lacks(tmp_path: Path) -> None:
    """A main table that grew past the graphs' size without one (made before graphs, or its
    graph removed) gets it from the indexer's background thread, not at the next move; the
    owner counts that work as busy until it is done."""
    store = Store(tmp_path / "chat_sessions.db")
    fill(store, sessions=6, turns=10)
    small = {"recent_rows": 20, "index_min_rows": 1_000, "held_rows": 0}
    plain = VectorIndex(tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim, **small)
    Indexer(store, plain, HashEmbedder(), batch=20).index_all()  # graph_rows: 20,000 rows
    assert not list((tmp_path / "lancedb").glob("turns.graph*"))
    index = VectorIndex(
        tmp_path / "lancedb", HashEmbedder.model_id, HashEmbedder.dim, graph_rows=10, **small
    )
    indexer = Indexer(store, index, HashEmbedder(), batch=20)
    indexer.start()
    try:
        assert indexer.wait_idle(30)
    finally:
        indexer.stop()
    assert "built the graph of turns" in indexer.repairs
    assert list((tmp_path / "lancedb").glob("turns.graph*.usearch"))
    answered = index._graphs.answered
    hits = index.search("turns", HashEmbedder().embed(["tea talk 0-0"])[0], 5)
    assert hits and index._graphs.answered == answered + 1  # the graph answered it
