"""The HNSW graph beside a large main table (seelen/vectors/graph.py, sidecar.py), on real
LanceDB tables and usearch files in a temporary folder, with the thresholds lowered."""

from __future__ import annotations

import shutil
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from seelen.vectors import VectorIndex, VectorRow
from seelen.vectors.graph import EXACT_NODES
from seelen.vectors.graph_files import rows_file

DIM = 16
SESSIONS = 7
# f16 vectors keep 11 bits: their cosines differ from the float32 ones by well under this.
SCORE_ERROR = 2e-3


def vectors(n: int, seed: int = 7) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def rows(matrix: np.ndarray, prefix: str = "t", start: int = 0) -> list[VectorRow]:
    """Rows `<prefix><n>` in sessions `s<n % 7>` (`<prefix>s<n % 7>` for another prefix)."""
    sessions = "s" if prefix == "t" else prefix + "s"
    return [
        VectorRow(f"{prefix}{start + i}", f"{sessions}{(start + i) % SESSIONS}", start + i, vector)
        for i, vector in enumerate(matrix)
    ]


def writer(path: Path, **options: int | None) -> VectorIndex:
    """An index whose main table gets a graph from its first row on (a move every 50 rows)."""
    settings: dict[str, int | None] = {
        "index_min_rows": 100,
        "recent_rows": 50,
        "held_rows": 0,
        "graph_rows": 0,
    }
    return VectorIndex(path, "m", DIM, **(settings | options))  # type: ignore[arg-type]


def by_lancedb(path: Path) -> VectorIndex:
    """A reader that never uses a graph: LanceDB's own search, to compare with."""
    return VectorIndex(path, "m", DIM, held_rows=0, graph_rows=None, read_only=True)


def fill(index: VectorIndex, matrix: np.ndarray, prefix: str = "t", start: int = 0) -> None:
    """Add the rows of `matrix` from `start` on, 25 at a time."""
    for at in range(start, len(matrix), 25):
        index.add("turns", rows(matrix[at : at + 25], prefix, at))


@pytest.fixture(scope="module")
def filled_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Index folders of `vectors(300)` filled once for the module (25 rows an add, a move
    every 50, as an indexer writes them), which each test copies before it opens and changes
    its copy (`filled`): "graph", by a `writer` that keeps the table's graph current;
    "no graph", by one that keeps none (a profile from before graphs)."""
    folders = {"graph": {}, "no graph": {"graph_rows": None}}
    made = {}
    for name, options in folders.items():
        made[name] = tmp_path_factory.mktemp("filled") / "lancedb"
        fill(writer(made[name], **options), vectors(300))
    return made


@pytest.fixture
def filled(filled_folders: dict[str, Path], tmp_path: Path):  # type: ignore[no-untyped-def]
    """`filled(name)`: a copy of the module's filled folder `name`, this test's own."""

    def copy(name: str) -> Path:
        return Path(shutil.copytree(filled_folders[name], tmp_path / "lancedb"))

    return copy


def same(mine: list, theirs: list) -> None:  # type: ignore[type-arg]
    assert [h.text_id for h in mine] == [h.text_id for h in theirs]
    assert [h.session_id for h in mine] == [h.session_id for h in theirs]
    assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=SCORE_ERROR)


def graph_files(path: Path) -> list[Path]:
    return sorted(path.glob("turns.graph*"))


def forgotten_stay_gone(
    index: VectorIndex, lancedb: VectorIndex, queries: list[np.ndarray]
) -> None:
    """t7 and session s3 were forgotten: searches through the graph (whole table, a session
    left out, inside sessions) never find them, and return what LanceDB's own search does."""
    for query in queries:
        for options in ({}, {"exclude_session": "s0"}, {"only_sessions": ["s0", "s3"]}):
            before = index._graphs.answered
            hits = index.search("turns", query, 8, **options)  # type: ignore[arg-type]
            assert index._graphs.answered == before + 1
            assert not {"t7", "t3"} & {h.text_id for h in hits}
            assert all(h.session_id != "s3" for h in hits)
            same(hits, lancedb.search("turns", query, 8, **options))  # type: ignore[arg-type]


def test_searches_through_the_graph_match_lancedbs(filled) -> None:  # type: ignore[no-untyped-def]
    """Whole-table searches (with a session left out) and searches inside sessions return
    the rows and scores LanceDB's own search returns, and the graph answered them."""
    path, matrix = filled("graph"), vectors(420)  # its first 300 rows: vectors(300)
    index = writer(path)
    fill(index, matrix, start=300)  # two moves that grow the graph
    assert index._tables["turns"].count_rows() == 400  # 20 rows still in the recent table
    lancedb = by_lancedb(path)
    for seed in range(8):
        query = matrix[seed * 50] if seed % 2 else vectors(1, 100 + seed)[0]
        for options in ({}, {"exclude_session": "s2"}, {"only_sessions": ["s3", "s5"]}):
            before = index._graphs.answered
            mine = index.search("turns", query, 10, **options)  # type: ignore[arg-type]
            assert index._graphs.answered == before + 1
            same(mine, lancedb.search("turns", query, 10, **options))  # type: ignore[arg-type]
    assert lancedb._graphs.answered == 0
    index.release()  # an idle owner closes its graphs; the next search opens them again
    assert index._graphs._seen == {}
    assert index.search("turns", matrix[7], 1)[0].text_id == "t7"
    assert index._graphs.answered == 25
    files = graph_files(path)
    assert sorted(f.suffix for f in files) == [".arrow", ".usearch"]  # one graph: the current
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)


def test_a_reader_uses_the_current_graph_and_not_a_stale_one(filled) -> None:  # type: ignore[no-untyped-def]
    """Another process opening the folder searches the graph while it matches the table's
    version; once the table changed without it (a writer that keeps no graph), the graph is
    not used, and the deleted row is not found."""
    path, matrix = filled("graph"), vectors(300)
    reader = VectorIndex(path, "m", DIM, held_rows=0, read_only=True)
    assert reader.search("turns", matrix[10], 1)[0].text_id == "t10"
    assert reader._graphs.answered == 1
    other = VectorIndex(path, "m", DIM, held_rows=0, graph_rows=None)
    assert other.delete("turns", text_ids=["t10"]) == 1
    late = VectorIndex(path, "m", DIM, held_rows=0, read_only=True)
    assert "t10" not in [h.text_id for h in late.search("turns", matrix[10], 5)]
    assert late._graphs.answered == 0  # the graph is of an older version: LanceDB answered


def test_a_deleted_row_never_comes_back(filled) -> None:  # type: ignore[no-untyped-def]
    """Rows forgotten by id or by session stay gone through the graph: at once, after the
    next move of rows into the table, after a rebuild; a replaced row shows its new vector."""
    path, matrix = filled("graph"), vectors(300)
    index = writer(path)
    assert index.delete("turns", text_ids=["t7"]) == 1
    assert index.delete("turns", session_id="s3") == len(range(3, 300, SESSIONS))
    index.add("turns", [VectorRow("t8", "s1", 0, -matrix[8])])  # t8 embedded again
    lancedb = by_lancedb(path)

    def check() -> None:
        forgotten_stay_gone(index, lancedb, [matrix[7], matrix[3], matrix[8]])
        assert index.search("turns", matrix[8], 1)[0].text_id != "t8"  # its old vector is gone

    check()
    fill(index, vectors(50, seed=9), prefix="n")  # a move: the graph grows
    lancedb = by_lancedb(path)
    check()
    index.rebuild_indices()
    lancedb = by_lancedb(path)
    check()
    assert index.search("turns", -matrix[8], 1)[0].text_id == "t8"


def test_a_forget_during_a_build_does_not_wait_and_stays_forgotten(filled) -> None:  # type: ignore[no-untyped-def]
    """A whole build reads a snapshot of the table with no lock held: forgetting (by id, by
    session) and a move of new rows go on meanwhile, and are replayed on the graph before it
    is published for the table's version, so the forgotten rows are never found through it
    and the moved ones are."""
    path, matrix = filled("no graph"), vectors(350)  # its first 300 rows: vectors(300)
    index = writer(path)
    keeper, building, go = index._graphs, threading.Event(), threading.Event()
    build = keeper.build

    def held_up(kind: str, snapshot, changes):  # type: ignore[no-untyped-def]
        building.set()  # the snapshot is taken: the build runs until `go`
        assert go.wait(30)
        return build(kind, snapshot, changes)

    keeper.build = held_up  # type: ignore[method-assign]
    built: list[str] = []
    builder = threading.Thread(target=lambda: built.extend(index.build_missing_graphs()))
    builder.start()
    assert building.wait(30)

    def writes() -> None:
        assert index.delete("turns", text_ids=["t7"]) == 1
        assert index.delete("turns", session_id="s3") == len(range(3, 300, SESSIONS))
        for start in range(300, 350, 25):  # a move of 50 rows into the main table
            index.add("turns", rows(matrix[start : start + 25], "n", start))

    writer_thread = threading.Thread(target=writes)
    writer_thread.start()
    writer_thread.join(30)
    assert not writer_thread.is_alive()  # the writes did not wait for the build
    assert index._graphs.current("turns", index._tables["turns"].version) is None
    go.set()
    builder.join(30)
    assert built == ["turns"]
    graph = index._graphs.current("turns", index._tables["turns"].version)
    assert graph is not None  # published for the version the writes reached
    flags = dict(zip(graph.rows.ids.to_pylist(), graph.rows.alive.tolist(), strict=True))
    assert flags["t7"] is False and flags["t3"] is False and flags["n340"] is True
    forgotten_stay_gone(index, by_lancedb(path), [matrix[7], matrix[3], matrix[340], matrix[8]])
    assert index.search("turns", matrix[340], 1)[0].text_id == "n340"


def test_a_move_grows_the_graph_off_the_lock_and_a_forget_meanwhile_is_replayed(
    filled,  # type: ignore[no-untyped-def]
) -> None:
    """A move into a table with a current graph makes it due to grow (loaded, added to,
    saved whole): with no lock held, so a forget meanwhile does not wait, and is replayed
    on the grown graph before it is published."""
    path, matrix = filled("graph"), vectors(350)  # its first 300 rows: vectors(300)
    index = writer(path)
    keeper, building, go = index._graphs, threading.Event(), threading.Event()
    build, replays = keeper.build, []

    def held_up(kind: str, source, changes):  # type: ignore[no-untyped-def]
        replays.append([c.added is not None for c in changes])
        building.set()
        assert go.wait(30)
        return build(kind, source, changes)

    keeper.build = held_up  # type: ignore[method-assign]
    for start in range(300, 350, 25):  # a move; its growth left to `build_graphs`
        index.add("turns", rows(matrix[start : start + 25], "n", start), build=False)
    builder = threading.Thread(target=index.build_graphs)
    builder.start()
    assert building.wait(30)
    forget = threading.Thread(target=index.delete, args=("turns",), kwargs={"text_ids": ["t7"]})
    forget.start()
    forget.join(30)
    assert not forget.is_alive()  # it did not wait for the graph to grow
    index.delete("turns", session_id="s3")
    go.set()
    builder.join(30)
    assert replays == [[True]]  # the move, replayed on the graph of the version before it
    graph = index._graphs.current("turns", index._tables["turns"].version)
    assert graph is not None and len(graph) == 350
    forgotten_stay_gone(index, by_lancedb(path), [matrix[7], matrix[3], matrix[340]])
    assert index.search("turns", matrix[340], 1)[0].text_id == "n340"


def test_a_rebuild_asked_during_a_build_throws_it_away_and_builds_again(filled) -> None:  # type: ignore[no-untyped-def]
    """A build overtaken by a rebuild (`rebuild_indices`) is not published; the graph built
    after it is, once: the rows file names one graph file."""
    path, matrix = filled("no graph"), vectors(300)
    index = writer(path)
    keeper, building, go = index._graphs, threading.Event(), threading.Event()
    build, snapshots = keeper.build, []

    def held_up(kind: str, snapshot, changes):  # type: ignore[no-untyped-def]
        snapshots.append(snapshot.version)
        if len(snapshots) == 1:
            building.set()
            assert go.wait(30)
        return build(kind, snapshot, changes)

    keeper.build = held_up  # type: ignore[method-assign]
    builder = threading.Thread(target=index.build_missing_graphs)
    builder.start()
    assert building.wait(30)
    rebuilt = threading.Thread(target=index.rebuild_indices)  # asks for a graph anew
    rebuilt.start()
    rebuilt.join(30)
    assert not rebuilt.is_alive()  # it did not wait for the build either
    go.set()
    builder.join(30)
    version = index._tables["turns"].version
    assert len(snapshots) == 2 and snapshots[1] == version
    graph = index._graphs.current("turns", version)
    assert graph is not None and len(graph_files(path)) == 2  # one graph file and its rows
    assert index.search("turns", matrix[42], 1)[0].text_id == "t42"


@pytest.mark.parametrize("damage", ["graph", "rows"])
def test_a_damaged_graph_is_not_used_and_is_rebuilt(filled, damage: str) -> None:  # type: ignore[no-untyped-def]
    """A graph file or rows file that cannot be read costs speed only: LanceDB answers, and
    the next move of rows into the table builds the graph anew."""
    path, matrix = filled("graph"), vectors(300)
    (graph,) = path.glob("turns.graph-*.usearch")
    broken = graph if damage == "graph" else rows_file(path, "turns")
    broken.write_bytes(b"\0garbage" * (broken.stat().st_size // 8))
    reader = VectorIndex(path, "m", DIM, held_rows=0, read_only=True)
    assert reader.search("turns", matrix[42], 1)[0].text_id == "t42"
    assert reader._graphs.answered == 0
    fresh = writer(path)  # a new owner: the damaged graph does not match anything
    assert fresh.search("turns", matrix[43], 1)[0].text_id == "t43"
    assert fresh._graphs.answered == 0
    fill(fresh, vectors(75, seed=5), prefix="n")  # a move into the main table
    assert fresh.search("turns", matrix[200], 1)[0].text_id == "t200"
    assert fresh._graphs.answered == 1
    same(fresh.search("turns", matrix[201], 10), by_lancedb(path).search("turns", matrix[201], 10))


def test_a_bulk_builds_the_graph_once_at_its_end(tmp_path: Path) -> None:
    """Inside `bulk()` the moves leave the graph stale (LanceDB answers, every row found);
    its end builds the graph from every row, and a re-index's swapped-in folder has one."""
    path = tmp_path / "lancedb"
    index = writer(path)
    matrix = vectors(400)
    fill(index, matrix[:100])
    with index.bulk():
        fill(index, matrix[:350])
        before = index._graphs.answered
        assert index.search("turns", matrix[320], 1)[0].text_id == "t320"
        assert index._graphs.answered == before
    assert index.search("turns", matrix[320], 1)[0].text_id == "t320"
    assert index._graphs.answered == before + 1
    staged = index.staging()
    with staged.bulk():
        fill(staged, matrix)
    index.swap_in(staged)
    assert index.search("turns", matrix[390], 1)[0].text_id == "t390"
    assert index._graphs.answered == 1  # a new keeper for the new folder
    same(index.search("turns", matrix[5], 10), by_lancedb(path).search("turns", matrix[5], 10))


def test_a_table_shrunk_below_the_threshold_drops_its_graph(tmp_path: Path) -> None:
    path = tmp_path / "lancedb"
    index = writer(path, graph_rows=120)
    fill(index, vectors(200))
    assert graph_files(path)
    for session in range(SESSIONS - 3):
        index.delete("turns", session_id=f"s{session}")
    assert graph_files(path) == []
    assert index.search("turns", vectors(200)[6], 1)[0].text_id == "t6"


def test_rows_with_equal_vectors_share_a_node(tmp_path: Path) -> None:
    """The same vector stored many times (a text said again) is one node of the graph, and
    each of its rows is still found, filtered and forgotten on its own."""
    path = tmp_path / "lancedb"
    index = writer(path)
    distinct = vectors(60)
    matrix = np.concatenate([distinct] * 5)  # each vector five times, in different sessions
    fill(index, matrix)
    graph = index._graphs.current("turns", index._tables["turns"].version)
    assert graph is not None and len(graph) == 300 and len(graph.index) == 60
    copies = [f"t{i}" for i in range(4, 300, 60)]
    assert {h.text_id for h in index.search("turns", distinct[4], 5)} == set(copies)
    hits = index.search("turns", distinct[4], 4, exclude_session="s4")
    assert "t4" not in {h.text_id for h in hits} and {h.score for h in hits[:3]} == {hits[0].score}
    index.delete("turns", text_ids=copies)
    fill(index, vectors(50, seed=3), prefix="n")  # a move: nodes without live rows go
    graph = index._graphs.current("turns", index._tables["turns"].version)
    assert graph is not None and len(graph.index) == 60 - 1 + 50
    assert index._graphs.answered > 0
    for query in (distinct[4], distinct[5], vectors(1, 11)[0]):
        for options in ({}, {"exclude_session": "s3"}, {"only_sessions": ["s4", "ns2"]}):
            mine = index.search("turns", query, 12, **options)  # type: ignore[arg-type]
            same(mine, by_lancedb(path).search("turns", query, 12, **options))  # type: ignore[arg-type]
    index.add("turns", [VectorRow("again", "s0", 0, distinct[4])])
    assert "again" in {h.text_id for h in index.search("turns", distinct[4], 3)}


def test_a_large_graph_is_walked_and_finds_the_nearest_rows(tmp_path: Path) -> None:
    """Above EXACT_NODES the graph is walked, not scanned: its best rows are, by score, those
    of an exact scan (HNSW may miss a near tie: 0.99-1.0 of them, 0.95 asked)."""
    path = tmp_path / "lancedb"
    index = writer(path, recent_rows=600)
    matrix = vectors(EXACT_NODES + 500)
    with index.bulk():  # one add, as an import's: the graph is built at the bulk's end
        index.add("turns", rows(matrix))
    graph = index._graphs.current("turns", index._tables["turns"].version)
    assert graph is not None and len(graph.index) > EXACT_NODES
    reached = []
    for seed in range(40):
        query = vectors(1, 1000 + seed)[0]
        hits = index.search("turns", query, 10, exclude_session="s1")
        assert all(h.session_id != "s1" for h in hits) and len(hits) == 10
        allowed = np.array([i % SESSIONS != 1 for i in range(len(matrix))])
        exact = np.sort(np.where(allowed, matrix @ query, -9))[::-1][:10]
        reached.append(np.mean(np.array([h.score for h in hits]) >= exact - SCORE_ERROR))
    assert index._graphs.answered == 40
    assert np.mean(reached) >= 0.95, np.mean(reached)


def test_a_reset_drops_the_graphs(tmp_path: Path) -> None:
    """After `reset` the tables count their versions from the start again: a graph of the
    old rows must not be taken for a new table's."""
    path = tmp_path / "lancedb"
    index = writer(path)
    fill(index, vectors(100))
    assert graph_files(path)
    index.reset()
    assert graph_files(path) == []
    fresh = writer(path, graph_rows=10_000)  # a new table that keeps no graph of its own
    fill(fresh, vectors(100, seed=4), prefix="n")
    assert fresh.search("turns", vectors(100)[3], 1)[0].text_id.startswith("n")
    assert fresh._graphs.answered == 0
