"""The LanceDB vector index, on real tables in a temporary folder."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import heavy_imports

from seelen.errors import StoreError
from seelen.vectors import META_FILE, VectorIndex, VectorRow, sql_in, sql_string
from seelen.vectors.index import HELD_AFTER

DIM = 16
NASTY_IDS = [
    "a'b",
    "x' OR '1'='1",
    "x",
    '"quoted"',
    "back\\slash\\",
    "back\\'",
    "100%_like",
    "line\nbreak",
    "ünï😀",
    "''",
    "",
]


def unit(seed: int | np.ndarray) -> np.ndarray:
    """A random unit vector from `seed`, or `seed` itself scaled to length 1."""
    v = np.random.default_rng(seed).standard_normal(DIM) if isinstance(seed, int) else seed
    return (np.asarray(v, dtype=np.float32) / np.linalg.norm(v)).astype(np.float32)


def near(base: np.ndarray, angle: float) -> np.ndarray:
    """A unit vector at `angle` radians from unit vector `base`."""
    other = unit(12345)
    other = unit(other - (other @ base) * base)
    return unit(np.cos(angle) * base + np.sin(angle) * other)


def row(text_id: str, session_id: str, vector: np.ndarray, ts_ms: int = 0) -> VectorRow:
    return VectorRow(text_id, session_id, ts_ms, vector)


@pytest.fixture(params=["recent", "main", "lancedb", "graph"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> VectorIndex:
    """An index whose rows stay in the recent table (searched in memory) or, with
    `recent_rows=1`, move to the main table at once: searched in its copy in memory (a small
    table), or with `held_rows=0` by LanceDB with SQL filters, or through its HNSW graph (a
    large one)."""
    recent_rows = 1_000 if request.param == "recent" else 1
    held_rows = 0 if request.param in ("lancedb", "graph") else 1_000
    graph_rows = 0 if request.param == "graph" else None
    return VectorIndex(
        tmp_path / "lancedb",
        "test:model",
        DIM,
        recent_rows=recent_rows,
        held_rows=held_rows,
        graph_rows=graph_rows,
    )


def test_importing_vectors_loads_no_heavy_library() -> None:
    assert heavy_imports("seelen.vectors", ("lancedb", "pyarrow")) == []


def test_sql_quoting_helper() -> None:
    assert sql_string("plain") == "'plain'"
    assert sql_string("a'b") == "'a''b'"
    assert sql_string("x' OR '1'='1") == "'x'' OR ''1''=''1'"
    assert sql_string("back\\") == "'back\\'"  # a backslash escapes nothing in DataFusion
    assert sql_in("session_id", ["a", "b'c"]) == "session_id IN ('a', 'b''c')"
    with pytest.raises(TypeError):
        sql_string(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sql_in("session_id", [])


def test_empty_index(index: VectorIndex) -> None:
    assert index.compatible()
    assert index.count("turns") == 0
    assert index.text_ids("summaries") == set()
    assert index.search("turns", unit(1), 5) == []
    assert index.delete("turns", text_ids=["x"]) == 0
    index.add("turns", [row("t1", "s1", unit(1))])  # tables created after being missing
    assert [h.text_id for h in index.search("turns", unit(1), 5)] == ["t1"]


def test_search_orders_by_cosine_similarity(index: VectorIndex) -> None:
    query = unit(1)
    angles = {"far": 1.4, "close": 0.1, "middle": 0.7, "closer": 0.05, "opposite": 3.0}
    index.add("turns", [row(t, "s1", near(query, a)) for t, a in angles.items()])
    hits = index.search("turns", query, 4)
    assert [h.text_id for h in hits] == ["closer", "close", "middle", "far"]
    # A graph's scores are those of its f16 vectors (seelen/vectors/graph.py).
    error = 2e-3 if index.graph_rows == 0 else 1e-5
    for hit in hits:
        assert hit.score == pytest.approx(np.cos(angles[hit.text_id]), abs=error)
        assert hit.session_id == "s1"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_add_is_an_upsert_by_text_id(index: VectorIndex) -> None:
    query = unit(1)
    index.add("turns", [row("t1", "s1", near(query, 1.0)), row("t2", "s1", unit(2))])
    index.add("turns", [row("t1", "s2", query)])  # same id again: replaced, not duplicated
    index.add("turns", [row("t3", "s1", unit(3)), row("t3", "s1", near(query, 0.2))])
    assert index.count("turns") == 3
    best = index.search("turns", query, 1)[0]
    assert (best.text_id, best.session_id) == ("t1", "s2")
    assert best.score == pytest.approx(1.0, abs=1e-5)
    t3 = next(h for h in index.search("turns", query, 3) if h.text_id == "t3")
    assert t3.score == pytest.approx(np.cos(0.2), abs=1e-5)  # the last of the batch won
    reopened = VectorIndex(index.path, index.model_id, DIM)  # what was stored, not cached
    assert reopened.count("turns") == 3
    hits = {h.text_id: h for h in reopened.search("turns", query, 3)}
    assert hits["t1"].session_id == "s2" and hits["t1"].score == pytest.approx(1.0, abs=1e-5)


def test_kinds_are_separate_tables(index: VectorIndex) -> None:
    index.add("turns", [row("t1", "s1", unit(1))])
    index.add("summaries", [row("u1", "s1", unit(1)), row("u2", "s1", unit(2))])
    assert index.count("turns") == 1 and index.count("summaries") == 2
    assert {h.text_id for h in index.search("summaries", unit(1), 5)} == {"u1", "u2"}
    with pytest.raises(ValueError):
        index.count("memories")


def test_exclude_session_still_returns_limit_hits(index: VectorIndex) -> None:
    """The excluded session holds the best matches; filtering first still fills `limit`."""
    query = unit(1)
    rows = [row(f"mine{i}", "a'b", near(query, 0.01 * (i + 1))) for i in range(10)]
    rows += [row(f"other{i}", f"s{i % 3}", near(query, 0.5 + 0.1 * i)) for i in range(8)]
    index.add("turns", rows)
    hits = index.search("turns", query, 5, exclude_session="a'b")
    assert [h.text_id for h in hits] == [f"other{i}" for i in range(5)]
    assert index.search("turns", query, 5, exclude_session="a")[0].text_id == "mine0"


def test_only_sessions(index: VectorIndex) -> None:
    query = unit(1)
    index.add("turns", [row(f"t{i}", f"s{i % 4}", near(query, 0.1 * i)) for i in range(20)])
    for _ in range(HELD_AFTER):  # a small main table: in LanceDB, then in its copy
        hits = index.search("turns", query, 3, only_sessions=["s1", "s3"])
        assert [h.text_id for h in hits] == ["t1", "t3", "t5"]
        both = index.search("turns", query, 50, only_sessions=["s3", "s1"], exclude_session="s3")
        assert [h.text_id for h in both] == [f"t{i}" for i in range(1, 20, 4)]
    assert index.search("turns", query, 3, only_sessions=[]) == []
    assert index.search("turns", query, 3, only_sessions=["nobody"]) == []


def test_quotes_in_ids_neither_break_nor_widen_filters(index: VectorIndex) -> None:
    query = unit(1)
    rows = [row(f"t-{s}", s, near(query, 0.05 * i)) for i, s in enumerate(NASTY_IDS)]
    rows += [row(f"u-{s}", s, near(query, 0.5 + 0.05 * i)) for i, s in enumerate(NASTY_IDS)]
    index.add("turns", rows)
    total = len(rows)
    for session in NASTY_IDS:
        only = index.search("turns", query, total, only_sessions=[session])
        assert {h.text_id for h in only} == {f"t-{session}", f"u-{session}"}, session
        rest = index.search("turns", query, total, exclude_session=session)
        assert len(rest) == total - 2 and session not in {h.session_id for h in rest}
    assert index.search("turns", query, total, only_sessions=["' OR ''='"]) == []


def test_delete_by_nasty_session_deletes_only_its_rows(index: VectorIndex) -> None:
    rows = [row(f"t{i}-{s}", s, unit(i)) for i, s in enumerate(NASTY_IDS)]
    rows.append(row("t-extra", "x' OR '1'='1", unit(99)))
    index.add("turns", rows)
    assert index.delete("turns", session_id="x' OR '1'='1") == 2
    assert index.delete("turns", session_id="' OR 1=1 --") == 0
    assert index.count("turns") == len(NASTY_IDS) - 1
    assert "x' OR '1'='1" not in {h.session_id for h in index.search("turns", unit(1), 50)}


def test_delete_by_text_ids(index: VectorIndex) -> None:
    ids = ["a'b", "x' OR '1'='1", "plain", "back\\", "keep"]
    index.add(
        "summaries", [row(t, "s" if t != "keep" else "s2", unit(i)) for i, t in enumerate(ids)]
    )
    assert index.delete("summaries", text_ids=["a'b", "x' OR '1'='1", "missing", "a'b"]) == 2
    assert index.text_ids("summaries") == {"plain", "back\\", "keep"}
    assert index.delete("summaries") == 0  # neither ids nor a session: nothing
    assert index.delete("summaries", text_ids=["plain"], session_id="s") == 2  # plain, back\\
    assert index.text_ids("summaries") == {"keep"}
    with pytest.raises(TypeError):
        index.delete("summaries", text_ids="keep")


def test_text_ids_lists_every_row(index: VectorIndex) -> None:
    ids = {f"t{i}" for i in range(40)}  # more than a query's default limit of 10
    index.add("turns", [row(t, "s", unit(i)) for i, t in enumerate(sorted(ids))])
    assert index.text_ids("turns") == ids


def test_persists_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "lancedb"
    VectorIndex(path, "test:model", DIM).add("turns", [row("t1", "s1", unit(1), ts_ms=5)])
    again = VectorIndex(path, "test:model", DIM)
    assert again.compatible()
    assert again.count("turns") == 1
    assert again.search("turns", unit(1), 1)[0].text_id == "t1"


def test_model_change_needs_reset(tmp_path: Path) -> None:
    path = tmp_path / "lancedb"
    VectorIndex(path, "local:a", DIM).add("turns", [row("t1", "s1", unit(1))])
    assert not VectorIndex(path, "local:b", DIM).compatible()
    assert not VectorIndex(path, "local:a", DIM * 2).compatible()
    other = VectorIndex(path, "openai:b", 8)
    with pytest.raises(StoreError, match="another embedding model"):
        other.add("turns", [VectorRow("t2", "s1", 0, np.ones(8))])
    other.reset()
    assert other.compatible() and other.count("turns") == 0
    other.add("turns", [VectorRow("t2", "s1", 0, np.ones(8))])
    assert VectorIndex(path, "openai:b", 8).count("turns") == 1
    assert not VectorIndex(path, "local:a", DIM).compatible()
    assert json.loads((path / META_FILE).read_text())["model_id"] == "openai:b"


def test_vectors_without_a_model_record_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "lancedb"
    VectorIndex(path, "m", DIM).add("turns", [row("t1", "s1", unit(1))])
    (path / META_FILE).unlink()
    assert not VectorIndex(path, "m", DIM).compatible()


def test_a_reader_never_sees_a_first_table_without_its_model_record(tmp_path: Path) -> None:
    """A reader (another process: `memory search` right after the first `ask`) that looks
    while the first table is being made must not take the vectors for another model's."""
    path = tmp_path / "lancedb"
    writer = VectorIndex(path, "m", DIM)
    db = writer._connect()
    create = db.create_table
    seen: list[bool] = []

    def create_and_look(*args: object, **kwargs: object) -> object:
        table = create(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(VectorIndex(path, "m", DIM, read_only=True).compatible())
        return table

    db.create_table = create_and_look  # type: ignore[method-assign]
    writer.add("turns", [row("t1", "s1", unit(1))])
    assert seen and all(seen)
    assert (
        VectorIndex(path, "m", DIM, read_only=True).search("turns", unit(1), 1)[0].text_id == "t1"
    )


def test_a_reader_opened_before_the_first_vectors_trusts_them(tmp_path: Path) -> None:
    """`memory search` opened on a new profile while the owner embeds its first turns: the
    record the writer makes then is read, not the absence seen at opening."""
    path = tmp_path / "lancedb"
    reader = VectorIndex(path, "m", DIM, read_only=True)
    assert reader.compatible()  # nothing stored yet
    VectorIndex(path, "m", DIM).add("turns", [row("t1", "s1", unit(1))])
    assert reader.compatible()
    assert reader.search("turns", unit(1), 1)[0].text_id == "t1"


def test_bad_input(index: VectorIndex) -> None:
    with pytest.raises(ValueError):
        index.add("turns", [VectorRow("t", "s", 0, np.ones(DIM + 1))])
    with pytest.raises(ValueError):
        index.add("turns", [VectorRow("t", "s", 0, np.full(DIM, np.nan))])
    index.add("turns", [row("t", "s", unit(1))])
    with pytest.raises(ValueError):
        index.search("turns", np.ones(DIM - 1), 3)
    assert index.search("turns", unit(1), 0) == []


def test_ann_index_search_matches_brute_force(tmp_path: Path) -> None:
    """Past the threshold an IVF_SQ index is built; results stay exact, new rows are found."""
    index = VectorIndex(
        tmp_path / "lancedb", "m", DIM, index_min_rows=200, recent_rows=150, held_rows=0
    )
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((650, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"t{i}" for i in range(len(vectors))]
    sessions = [f"s{i % 7}" for i in range(len(vectors))]
    for start in range(0, 650, 100):
        batch = range(start, min(start + 100, 650))
        index.add("turns", [row(ids[i], sessions[i], vectors[i]) for i in batch])
    main = index._tables["turns"]
    assert "vector" in {i.columns[0] for i in main.list_indices()}
    assert 0 < index._tables["turns_recent"].count_rows() < 150  # some rows not moved yet
    for seed in range(6):
        query = unit(100 + seed) if seed else vectors[649]
        scores = vectors @ query
        allowed = np.array([s != "s2" for s in sessions])
        expected = [ids[i] for i in np.argsort(-np.where(allowed, scores, -9))[:10]]
        hits = index.search("turns", query, 10, exclude_session="s2")
        assert [h.text_id for h in hits] == expected
        assert [h.score for h in hits] == pytest.approx(
            sorted(scores[allowed])[::-1][:10], abs=1e-5
        )
        within = np.array([s in ("s3", "s5") for s in sessions])
        expected = [ids[i] for i in np.argsort(-np.where(within, scores, -9))[:10]]
        hits = index.search("turns", query, 10, only_sessions=["s3", "s5"])
        assert [h.text_id for h in hits] == expected
    index.maintain()
    index.warm()
    assert index.count("turns") == 650
    assert index.search("turns", vectors[649], 1)[0].text_id == "t649"


def test_index_segments_stay_bounded(tmp_path: Path) -> None:
    """Each move of recent rows adds a delta segment to the vector index; too many trigger a
    rebuild."""
    index = VectorIndex(
        tmp_path / "lancedb",
        "m",
        DIM,
        index_min_rows=100,
        recent_rows=2,
        max_segments=3,
        held_rows=0,
    )
    index.add("turns", [row(f"t{i}", "s", unit(i)) for i in range(150)])
    main = index._tables["turns"]
    for i in range(16):  # eight moves: eight delta segments without rebuilds
        index.add("turns", [row(f"n{i}", "s", unit(1000 + i))])
        (vector_index,) = [x for x in main.list_indices() if x.columns[0] == "vector"]
        assert vector_index.num_segments <= 4
    assert main.stats()["fragment_stats"]["num_fragments"] <= 5
    assert index.search("turns", unit(1000), 1)[0].text_id == "n0"
    assert index.count("turns") == 166


def test_a_bulk_of_adds_is_indexed_once_at_the_end(tmp_path: Path) -> None:
    """Inside `bulk()` moved rows are appended without upkeep (every row still found, a
    replaced row still replaced); leaving it compacts the main table and builds its index."""
    index = VectorIndex(
        tmp_path / "lancedb", "m", DIM, index_min_rows=100, recent_rows=40, held_rows=0
    )
    index.add("turns", [row(f"t{i}", "s", unit(i)) for i in range(40)])  # moved, maintained
    main = index._tables["turns"]
    with index.bulk():
        for start in range(40, 400, 30):
            index.add("turns", [row(f"t{i}", "s", unit(i)) for i in range(start, start + 30)])
        index.add("turns", [row("t3", "s9", unit(1003))])  # a moved row, embedded again
        assert main.stats()["fragment_stats"]["num_fragments"] > 3  # appended, not compacted
        assert "vector" not in {i.columns[0] for i in main.list_indices()}
        assert index.search("turns", unit(250), 1)[0].text_id == "t250"
    assert main.stats()["fragment_stats"]["num_fragments"] == 1
    assert "vector" in {i.columns[0] for i in main.list_indices()}
    assert sorted(index.inventory("turns")) == sorted(f"t{i}" for i in range(400))
    best = index.search("turns", unit(1003), 1)[0]
    assert (best.text_id, best.session_id) == ("t3", "s9")


def test_many_small_writes_are_compacted(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "lancedb", "m", DIM, optimize_every=5)
    for i in range(15):
        index.add("turns", [row(f"t{i}", "s", unit(i))])
    fragments = index._tables["turns_recent"].stats()["fragment_stats"]["num_fragments"]
    assert fragments == 1  # 15 single-row writes would otherwise leave 15 fragments
    assert index.count("turns") == 15


def test_upsert_of_a_moved_row_replaces_it(tmp_path: Path) -> None:
    """A text re-embedded after its row moved to the main table still has one row."""
    index = VectorIndex(tmp_path / "lancedb", "m", DIM, recent_rows=3)
    index.add("turns", [row(f"t{i}", "s", unit(i)) for i in range(3)])  # moved at once
    assert index._tables["turns"].count_rows() == 3
    index.add("turns", [row("t1", "s9", unit(1000))])
    assert index.count("turns") == 3
    assert index.text_ids("turns") == {"t0", "t1", "t2"}
    best = index.search("turns", unit(1000), 1)[0]
    assert (best.text_id, best.session_id) == ("t1", "s9")
    assert best.score == pytest.approx(1.0, abs=1e-5)
    assert index.delete("turns", text_ids=["t1", "t2"]) == 2
    assert index.text_ids("turns") == {"t0"}


@pytest.mark.parametrize("held_rows", [0, 1_000])
def test_searches_during_writes_never_miss_a_row(tmp_path: Path, held_rows: int) -> None:
    """Readers run while rows move from the recent table to the indexed one (searched by
    LanceDB, or in its copy in memory, made again after each move)."""
    index = VectorIndex(
        tmp_path / "lancedb", "m", DIM, index_min_rows=20, recent_rows=10, held_rows=held_rows
    )
    anchor = unit(4242)
    index.add("turns", [row("anchor", "s0", anchor)])
    failures: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            hits = index.search("turns", anchor, 3)
            if not hits or hits[0].text_id != "anchor" or len(hits) != len(set(hits)):
                failures.append(repr(hits))
            time.sleep(0.002)  # leave the writer some CPU

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(30):  # three moves, each followed by an index build
            index.add("turns", [row(f"t{i}", f"s{i % 5}", unit(i))])
    finally:
        done.set()
        reader.join()
    assert failures == []
    assert index.count("turns") == 31


def test_a_small_main_table_is_searched_in_a_copy_that_follows_every_change(
    tmp_path: Path,
) -> None:
    """Up to `held_rows` rows, the main table is searched in memory, exactly as LanceDB
    would, once a table version has been searched a few times; the copy is made again after
    a move or a forget, and dropped by `release`; a larger table is searched by LanceDB."""
    path = tmp_path / "lancedb"
    index = VectorIndex(path, "m", DIM, recent_rows=5, held_rows=16)
    index.add("turns", [row(f"t{i}", f"s{i % 3}", unit(i)) for i in range(10)])  # two moves
    by_lancedb = VectorIndex(path, "m", DIM, held_rows=0, read_only=True)
    for seed in (3, 77, 78):  # the first searches of a version go to LanceDB
        index.search("turns", unit(seed), 4)
    assert index._held["turns"][3] is None
    for seed in (3, 77, 78):
        mine = index.search("turns", unit(seed), 4, exclude_session="s1")
        theirs = by_lancedb.search("turns", unit(seed), 4, exclude_session="s1")
        assert [h.text_id for h in mine] == [h.text_id for h in theirs]
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
    assert index._held["turns"][3] is not None  # the searches above ran on the copy

    def searched_often(seed: int) -> str:
        """The best hit's id, searched as often as a copy takes to be made."""
        return [index.search("turns", unit(seed), 1)[0].text_id for _ in range(4)][-1]

    index.delete("turns", text_ids=["t3"])  # a forget changes the main table
    assert searched_often(3) != "t3" and index._held["turns"][3] is not None
    index.add("turns", [row(f"n{i}", "s9", unit(500 + i)) for i in range(5)])  # another move
    assert searched_often(502) == "n2"
    index.release()
    assert index._held == {}
    assert searched_often(504) == "n4" and index._held["turns"][3] is not None  # made again
    index.add("turns", [row(f"m{i}", "s8", unit(900 + i)) for i in range(5)])  # 19 rows > 16
    assert searched_often(903) == "m3"  # found by LanceDB
    assert index._held["turns"][3] is None  # no copy of a larger table


def test_opening_an_index_skips_lancedbs_rest_client(tmp_path: Path) -> None:
    """`import lancedb` would load a generated REST client, the cloud client, namespaces and
    catalogs that a local index never uses (over a second); if a LanceDB release starts
    needing them at import, this fails loudly rather than letting every start-up slow down
    again. Each is still there at its first use."""
    code = f"""
import sys
import numpy as np
from seelen.vectors import VectorIndex, VectorRow
index = VectorIndex({str(tmp_path / "lancedb")!r}, "m", 4)
index.add("turns", [VectorRow("t1", "s1", 0, np.ones(4))])
assert index.search("turns", np.ones(4), 1)[0].text_id == "t1"
print(sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api")))
print(sorted(m for m in ("lancedb.remote.db", "lancedb.namespace", "lancedb.catalog")
             if m in sys.modules))
import lance_namespace_urllib3_client as client
import lancedb
print(client.ApiClient.__name__, lancedb.connect.__name__, lancedb.__version__)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    version = importlib.metadata.version("lancedb")
    assert result.stdout.split("\n")[:3] == ["[]", "[]", f"ApiClient connect {version}"]
