"""Benchmark embedding and vector search: what one recall costs at 10k and 100k turns.

Usage: python bench/bench_vectors.py [--rows 10000 100000] [--queries 200] [--skip-flat]
                                     [--settings 20:3,20:2,20:1,10:3,5:2]

Embedding uses the bundled ONNX model on made-up sentences. Search latency uses random
clustered unit vectors (the latency of a search does not depend on what the vectors mean);
its recall@10 is checked against exact numpy search on the same vectors. `--settings` sweeps
the index's search settings (NPROBES:REFINE_FACTOR pairs) on each table: latency and
recall@10 of each, so what a faster setting loses is shown beside it. Prints medians and
95th percentiles in milliseconds. The machine's load average is printed first: on a shared
2-core machine, other work shows up directly in these numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
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

from seelen.models.embed import LOCAL_DIM, LocalEmbedder
from seelen.vectors import VectorIndex, VectorRow

WORDS = (
    "cat dog garden trip Lisbon coffee morning project deadline music guitar book novel "
    "doctor appointment weekend mountain river train ticket birthday sister brother recipe "
    "pasta weather rain sunny office meeting code python database memory dream idea plan"
).split()
TURNS_PER_SESSION = 40


def percentiles(samples_ms: list[float]) -> str:
    """'median X p95 Y' of millisecond samples."""
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):7.2f} ms   p95 {p95:7.2f} ms"


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """Milliseconds of `repeat` calls of `fn`."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def sentences(n: int, rng: np.random.Generator) -> list[str]:
    """Chat-like texts of 4 to 60 words."""
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 60)))) for _ in range(n)]


def bench_embedding(rng: np.random.Generator, queries: int) -> LocalEmbedder:
    """Model load time, throughput (each text is its own run) and single-query latency."""
    embedder = LocalEmbedder()
    start = time.perf_counter()
    embedder.embed(["load the model"])
    print(f"  model load + first embed     {time.perf_counter() - start:7.2f} s")
    texts = sentences(512, rng)
    start = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - start
    print(f"  throughput                   {len(texts) / seconds:7.1f} texts/s  (4-60 words each)")
    query = "what did I tell you about my sister's birthday trip to Lisbon?"
    latency = timed(lambda: embedder.embed([query]), queries)
    print(f"  one query                    {percentiles(latency)}")
    return embedder


def clustered_vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors around 2,000 topics, like embeddings of many conversations."""
    centers = rng.standard_normal((2000, LOCAL_DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    vectors = centers[rng.integers(0, len(centers), n)]
    vectors = vectors + 0.06 * rng.standard_normal((n, LOCAL_DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fill(index: VectorIndex, vectors: np.ndarray) -> float:
    """Bulk-load `vectors` as turns in writes of 10,000 (indices are built as they come);
    returns the seconds it took."""
    start = time.perf_counter()
    for first in range(0, len(vectors), 10_000):
        rows = range(first, min(first + 10_000, len(vectors)))
        index.add(
            "turns", [VectorRow(f"t{i}", f"s{i // TURNS_PER_SESSION}", i, vectors[i]) for i in rows]
        )
    index.maintain()
    return time.perf_counter() - start


def rebuild_seconds(index: VectorIndex) -> float:
    """Time one rebuild of the turns' vector index, with the compaction that follows it."""
    table = index._tables["turns"]  # a benchmark may look inside
    start = time.perf_counter()
    index._build_vector_index("turns", table, table.count_rows())
    return time.perf_counter() - start


def recall_at_10(index: VectorIndex, vectors: np.ndarray, queries: np.ndarray) -> float:
    """Share of the exact top 10 (excluding session s0) that the index returns."""
    excluded = np.arange(len(vectors)) // TURNS_PER_SESSION == 0
    found = 0
    for query in queries[:50]:
        scores = np.where(excluded, -9.0, vectors @ query)
        exact = {f"t{i}" for i in np.argsort(-scores)[:10]}
        hits = index.search("turns", query, 10, exclude_session="s0")
        found += len(exact & {h.text_id for h in hits})
    return found / (10 * min(50, len(queries)))


def search_ms(index: VectorIndex, probes: np.ndarray, **filters: object) -> list[float]:
    """Milliseconds of one `search(limit=30)` per probe vector."""
    out = []
    for probe in probes:
        start = time.perf_counter()
        index.search("turns", probe, 30, **filters)  # type: ignore[arg-type]
        out.append((time.perf_counter() - start) * 1000)
    return out


def sweep_settings(
    index: VectorIndex, vectors: np.ndarray, probes: np.ndarray, settings: list[str]
) -> None:
    """Latency and recall@10 of the search under each NPROBES:REFINE_FACTOR pair."""
    from seelen.vectors import tables

    kept = tables.NPROBES, tables.REFINE_FACTOR
    try:
        for pair in settings:
            tables.NPROBES, tables.REFINE_FACTOR = (int(n) for n in pair.split(":"))
            took = percentiles(search_ms(index, probes))
            found = recall_at_10(index, vectors, probes)
            print(f"    nprobes:refine {pair:<6}    {took}   recall@10 {found:.3f}")
    finally:
        tables.NPROBES, tables.REFINE_FACTOR = kept


def bench_search(
    rows: int,
    queries: int,
    rng: np.random.Generator,
    flat: bool,
    embedder: LocalEmbedder,
    settings: list[str],
) -> None:
    """Search latency of one table of `rows` turns, with and without session filters."""
    vectors = clustered_vectors(rows, rng)
    picks = vectors[rng.integers(0, rows, queries)]
    probes = picks + 0.05 * rng.standard_normal(picks.shape).astype(np.float32)
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    variants: list[tuple[str, dict[str, int]]] = [("IVF_SQ index", {})]
    if flat:
        variants.append(("flat, no index", {"index_min_rows": 10**9}))
    for label, options in variants:
        with tempfile.TemporaryDirectory() as tmp:
            index = VectorIndex(Path(tmp), "bench", LOCAL_DIM, **options)
            loaded = fill(index, vectors)
            index.warm()
            print(f"  {rows:>7,} rows, {label}: bulk load {loaded:.2f} s")
            if not options:
                print(f"    index rebuild + compaction {rebuild_seconds(index):7.2f} s")
            report_search(index, probes if not options else probes[:40], rows, rng)
            print(f"    recall@10 vs exact         {recall_at_10(index, vectors, probes):7.3f}")
            if not options and settings:
                sweep_settings(index, vectors, probes, settings)
            if not options and rows >= 50_000:
                bench_writes(index, rng, probes)
                bench_recall(index, embedder, rng, queries)


def report_search(
    index: VectorIndex, probes: np.ndarray, rows: int, rng: np.random.Generator
) -> None:
    """Print latency without a filter, excluding one session, and within three sessions."""
    sessions = [f"s{i}" for i in rng.integers(0, rows // TURNS_PER_SESSION, 3)]
    print(f"    search 30                  {percentiles(search_ms(index, probes))}")
    excluded = search_ms(index, probes, exclude_session="s1")
    print(f"    search 30, exclude 1 sess  {percentiles(excluded)}")
    within = search_ms(index, probes, only_sessions=sessions)
    print(f"    search 30, only 3 sessions {percentiles(within)}")


def bench_writes(index: VectorIndex, rng: np.random.Generator, probes: np.ndarray) -> None:
    """One-row adds as a chat makes them, with the maintenance they trigger, then search."""
    samples = []
    for i, vector in enumerate(clustered_vectors(300, rng)):
        row = VectorRow(f"new{i}", f"new-session{i // 20}", i, vector)
        start = time.perf_counter()
        index.add("turns", [row])
        samples.append((time.perf_counter() - start) * 1000)
    print(f"    add 1 row (300 adds)       {percentiles(samples)}   max {max(samples):7.0f} ms")
    print(f"      adds over 1 s (index rebuilt + compacted): {sum(s > 1000 for s in samples)}")
    after = search_ms(index, probes, exclude_session="s1")
    print(f"    search 30 after the adds   {percentiles(after)}")


def bench_recall(
    index: VectorIndex, embedder: LocalEmbedder, rng: np.random.Generator, queries: int
) -> None:
    """The vector half of one recall as recall.py runs it: embed the query, search the
    summaries, the turns of other sessions, and the turns of the three best sessions."""
    sessions = len(index.text_ids("turns")) // TURNS_PER_SESSION
    summaries = clustered_vectors(sessions, rng)
    index.add("summaries", [VectorRow(f"u{i}", f"s{i}", i, v) for i, v in enumerate(summaries)])
    texts = sentences(queries, rng)
    samples = []
    for text in texts:
        start = time.perf_counter()
        vector = embedder.embed([text])[0]
        index.search("summaries", vector, 30, exclude_session="s1")
        index.search("turns", vector, 30, exclude_session="s1")
        index.search("turns", vector, 30, only_sessions=["s5", "s77", "s123"])
        samples.append((time.perf_counter() - start) * 1000)
    print(f"    recall, vector half ({sessions:,} summaries)")
    print(f"      embed + 3 searches       {percentiles(samples)}")


def main() -> None:
    """Run the benchmark and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-flat", action="store_true", help="skip the no-index baseline")
    parser.add_argument(
        "--settings", default="", help="NPROBES:REFINE_FACTOR pairs to sweep, comma-separated"
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print("embedding (all-MiniLM-L6-v2 int8, onnxruntime)")
    embedder = bench_embedding(rng, min(args.queries, 100))
    print("vector search (LanceDB, cosine, 384 dims, limit 30)")
    for rows in args.rows:
        settings = [p for p in args.settings.split(",") if p]
        bench_search(rows, args.queries, rng, not args.skip_flat, embedder, settings)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
