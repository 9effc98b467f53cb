"""A main table's version, read from LanceDB once between writes (vectors/versions.py): the
searches still see every write, this process's and another's."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from seelen.vectors import VectorIndex, VectorRow
from seelen.vectors.versions import TableVersions, WriteGate

DIM = 16

# Another process (the owner, an import) writing to the same folder: rows that move to the
# main table, and a forget of a row already there.
_WRITER = """
import sys
import numpy as np
from seelen.vectors import VectorIndex, VectorRow

def unit(seed):
    v = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return v / np.linalg.norm(v)

index = VectorIndex(sys.argv[1], "m", 16, recent_rows=5, held_rows=int(sys.argv[2]))
index.add("turns", [VectorRow(f"x{i}", "s9", 0, unit(700 + i)) for i in range(6)])
index.delete("turns", text_ids=["t2"])
"""


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def rows(prefix: str, session: str, seeds: range) -> list[VectorRow]:
    return [VectorRow(f"{prefix}{s - seeds.start}", session, 0, unit(s)) for s in seeds]


def best(index: VectorIndex, seed: int) -> str:
    return index.search("turns", unit(seed), 1)[0].text_id


@pytest.mark.parametrize("held_rows", [0, 1_000])
def test_a_search_after_another_process_wrote_finds_its_rows(
    tmp_path: Path, held_rows: int
) -> None:
    """Rows another process moved into the main table are found, and the row it forgot is
    not, by the next search opened on the folder, while this process's index (its main
    table's version read, and its copy in memory made) goes on answering."""
    path = tmp_path / "lancedb"
    index = VectorIndex(path, "m", DIM, recent_rows=5, held_rows=held_rows)
    index.add("turns", rows("t", "s1", range(12)))
    assert [best(index, 2) for _ in range(6)] == ["t2"] * 6  # the version read, a copy made
    subprocess.run([sys.executable, "-c", _WRITER, str(path), str(held_rows)], check=True)
    reader = VectorIndex(path, "m", DIM, held_rows=held_rows, read_only=True)
    assert best(reader, 703) == "x3"
    assert "t2" not in [h.text_id for h in reader.search("turns", unit(2), 20)]
    assert best(index, 5) == "t5"


@pytest.mark.parametrize("held_rows", [0, 1_000])
def test_the_version_read_once_is_lancedbs_after_every_write(
    tmp_path: Path, held_rows: int
) -> None:
    """After a move, a forget, a write that leaves the main table alone and an index build,
    the version a search uses is the one LanceDB gives, and the search sees the change."""
    index = VectorIndex(
        tmp_path / "lancedb", "m", DIM, index_min_rows=20, recent_rows=5, held_rows=held_rows
    )
    index.add("turns", rows("t", "s1", range(12)))
    writes = [
        lambda: index.add("turns", rows("n", "s2", range(300, 306))),  # a move
        lambda: index.delete("turns", text_ids=["t2"]),  # a forget in the main table
        lambda: index.add("turns", rows("r", "s3", range(400, 402))),  # the recent table's
        lambda: index.add("turns", rows("m", "s4", range(500, 515))),  # moves and an index
    ]
    for write in writes:
        for _ in range(5):
            index.search("turns", unit(1), 3)
        write()
        main = index._tables["turns"]
        assert index._versions.of("turns", main) == main.version
    assert best(index, 303) == "n3" and best(index, 401) == "r1" and best(index, 507) == "m7"
    assert "t2" not in [h.text_id for h in index.search("turns", unit(2), 30)]


class _Table:
    """A table whose version counts how often it was read."""

    def __init__(self) -> None:
        self.reads = 0
        self.number = 7

    @property
    def version(self) -> int:
        self.reads += 1
        return self.number


def test_a_version_read_while_a_write_is_under_way_is_not_kept() -> None:
    """Read once between writes; read again after a write ends, and at every search while
    one is under way (the write may change it at any moment)."""
    gate = WriteGate()
    versions, table = TableVersions(gate), _Table()
    assert [versions.of("turns", table) for _ in range(3)] == [7, 7, 7]  # type: ignore[arg-type]
    assert table.reads == 1
    entered, leave = threading.Event(), threading.Event()

    def write() -> None:
        with gate, gate:  # reentrant: one write
            entered.set()
            leave.wait()
            table.number = 8

    writer = threading.Thread(target=write)
    writer.start()
    entered.wait()
    assert [versions.of("turns", table) for _ in range(2)] == [7, 7]  # type: ignore[arg-type]
    assert table.reads == 3
    leave.set()
    writer.join()
    assert [versions.of("turns", table) for _ in range(3)] == [8, 8, 8]  # type: ignore[arg-type]
    assert table.reads == 4
    assert versions.of("turns", _Table()) == 7  # type: ignore[arg-type]  # another handle


def test_a_reader_finds_a_table_made_after_it_looked_for_it(tmp_path: Path) -> None:
    """A reader that found no summaries table (told so by the folder, without asking
    LanceDB) finds the one a writer makes later, at its next search."""
    path = tmp_path / "lancedb"
    VectorIndex(path, "m", DIM).add("turns", rows("t", "s1", range(3)))
    reader = VectorIndex(path, "m", DIM, read_only=True)
    assert reader.search("summaries", unit(1), 3) == []
    VectorIndex(path, "m", DIM).add("summaries", [VectorRow("sum1", "s1", 0, unit(9))])
    assert [h.text_id for h in reader.search("summaries", unit(9), 3)] == ["sum1"]
