"""Benchmark the vector index's self-repair: what checking it against SQLite costs at start.

Usage: python bench/bench_repair.py [--rows 10000 100000]

For each size: a real store of that many turns, an index holding a (random) vector for each,
then the time of `measure` for both kinds (SQLite's flags + every text id the index holds:
what the indexer's first pass and `seelen db check` pay), of a repair that finds nothing,
and of a full rebuild into new tables with a free embedder (LanceDB's side of a re-index;
the embedding model adds its own throughput, see bench_vectors.py). The machine's load
average is printed first: on a shared 2-core machine, other work shows up in these numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# One OpenBLAS thread, as `import seelen` sets it (seelen/__init__.py) for every command: numpy
# reads this once, when it loads, and this script loads numpy before Seelen.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seelen.memory.indexer import KINDS, Indexer, measure
from seelen.store import Store
from seelen.vectors import VectorIndex, VectorRow

DIM = 384
TURNS_PER_SESSION = 40


class RandomEmbedder:
    """Vectors at no cost, so a rebuild's time is the index's own."""

    model_id, dim = "bench:random", DIM

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.rng.standard_normal((len(texts), DIM)).astype(np.float32)


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def build(folder: Path, rows: int) -> Store:
    """A store of `rows` turns, all marked indexed, and an index with their vectors."""
    store = Store(folder / "chat_sessions.db")
    index = VectorIndex(folder / "lancedb", RandomEmbedder.model_id, DIM)
    embedder = RandomEmbedder()
    for start in range(0, rows, TURNS_PER_SESSION):
        session = store.create_session("archived")
        turns = store.add_turns(
            session.session_id,
            [("user", f"turn {start + i}", None, start + i) for i in range(TURNS_PER_SESSION)],
        )
        vectors = embedder.embed([t.text for t in turns])
        index.add(
            "turns",
            [
                VectorRow(t.text_id, t.session_id, t.ts_ms, v)
                for t, v in zip(turns, vectors, strict=True)
            ],
        )
        store.mark_indexed([t.text_id for t in turns])
    index.maintain()
    return store


def bench_size(folder: Path, rows: int) -> None:
    """Print the costs for one size of memory."""
    started = time.perf_counter()
    store = build(folder, rows)
    print(f"{rows:,} turns (built in {time.perf_counter() - started:.0f} s)")
    fresh = VectorIndex(folder / "lancedb", RandomEmbedder.model_id, DIM)
    took = seconds(lambda: [measure(store, fresh, kind) for kind in KINDS])
    print(f"    measure, freshly opened    {took * 1000:7.0f} ms")
    indexer = Indexer(store, fresh, RandomEmbedder(), batch=256)
    print(f"    repair finding nothing     {seconds(indexer.repair) * 1000:7.0f} ms")
    if rows <= 20_000:
        print(f"    rebuild into new tables    {seconds(indexer.rebuild):7.1f} s")
    store.close()


def main() -> None:
    """Run the benchmark and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as tmp:
            bench_size(Path(tmp), rows)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
