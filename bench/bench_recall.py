"""Benchmark recall on the synthetic memory dataset: quality per mode, and latency at scale.

Usage: python bench/bench_recall.py [--quality] [--speed] [--sizes 10000,100000]
                                    [--conv-num 10] [--queries 200] [--pool 2000]

Quality: the dataset (bench/recall_data.py) goes into a fresh Store and VectorIndex, every
session archived with its summary, everything embedded by the real Indexer; then each question
is asked in an empty current session and we check where the turn that answers it ranks.

Speed: the dataset padded with filler sessions to each size. Embedding 100k texts with the
real model would take many minutes, so a pool of distinct texts is embedded once and filler
rows borrow those vectors; SQLite FTS and LanceDB still hold every row. Latency includes
embedding the query. With neither --quality nor --speed, both parts run.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

# One OpenBLAS thread, as `import seelen` sets it (seelen/__init__.py) for every command: numpy
# reads this once, when it loads, and this script loads numpy before Seelen.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_data import BenchQuery, BenchSession, Dataset, build, chit_chat, scale

import seelen.memory.recall as recall_module
from seelen.memory import changes, when
from seelen.memory.clock import Clock
from seelen.memory.indexer import Indexer
from seelen.memory.recall import Recall
from seelen.models.embed import Embedder, embed_query, make_embedder
from seelen.models.languages import SAMPLE_CHARS, SAMPLE_TURNS, needs_multilingual
from seelen.store import Store
from seelen.vectors import VectorIndex, VectorRow
from seelen.vectors import index as vector_index

MODES = ("bm25", "vector", "hybrid")
RAW = ("bm25-raw", "vector-raw")  # one ranker alone, straight from the store / the index
KINDS = (
    "planted",
    "paraphrase-hard",
    "two-facts",
    "changed",
    "time",
    "chinese",
    "mixed",
    "several",
    "advice",
)
CHUNK = 5000


@dataclass
class Memory:
    """A loaded store: where each dataset turn went, and an empty current session."""

    store: Store
    index: VectorIndex
    turn_ids: dict[tuple[str, int], str]
    rows: list[tuple[str, str, str, int, str]]  # (kind, text_id, session_id, ts_ms, text)
    current: str
    load_seconds: float


@dataclass
class Outcome:
    """Where one question's answer ranked (None: not in the returned turns); `ranks` holds
    the rank of each turn the answer needs (two for a two-fact question), `rank` the best."""

    kind: str
    rank: int | None
    ranks: list[int | None]
    stale_rank: int | None
    distractor_first: bool
    session_found: bool


def log(message: str) -> None:
    """Progress on stderr, so stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)


def load_avg() -> str:
    """The 1/5/15-minute load average, for reading timings on a shared machine."""
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# Main vector tables up to this many rows are searched in a copy in memory (the product's
# default; `--held-rows 0`: always by LanceDB, as before that copy).
HELD_ROWS = vector_index.HELD_ROWS
# `--through`: every main table searched through its HNSW graph, or by LanceDB alone (no copy
# in memory, a 50-row recent table so that the bench's rows reach the main tables), to show
# that the graph ranks as LanceDB does; "default": as a profile is searched.
THROUGH = {
    "default": {},
    "graph": {"held_rows": 0, "graph_rows": 0, "recent_rows": 50},
    "lancedb": {"held_rows": 0, "graph_rows": None, "recent_rows": 50},
}
INDEX_OPTIONS: dict[str, int | None] = {}


def open_memory(
    directory: Path,
    sessions: Sequence[BenchSession],
    dim: int,
    model_id: str,
    summaries: bool = True,
) -> Memory:
    """A Store and VectorIndex in `directory` holding `sessions`, each archived with its
    summary (`summaries=False`: without, as an imported history)."""
    started = time.perf_counter()
    store = Store(directory / "bench.db")
    options: dict[str, Any] = {"held_rows": HELD_ROWS, **INDEX_OPTIONS}
    index = VectorIndex(directory / "lancedb", model_id, dim, **options)
    turn_ids: dict[tuple[str, int], str] = {}
    rows: list[tuple[str, str, str, int, str]] = []
    for s in sessions:
        sid = store.create_session(status="active", start_ms=s.turns[0].ts_ms).session_id
        added = store.add_turns(sid, [(t.role, t.text, None, t.ts_ms) for t in s.turns])
        for i, turn in enumerate(added):
            turn_ids[(s.key, i)] = turn.text_id
            rows.append(("turns", turn.text_id, sid, turn.ts_ms, turn.text))
        if summaries:
            summary = store.add_summary(sid, s.summary, s.turns[0].ts_ms, s.turns[-1].ts_ms)
            rows.append(("summaries", summary.text_id, sid, summary.start_ms, summary.text))
        store.mark_archived(sid)
    current = store.create_session(start_ms=sessions[-1].turns[-1].ts_ms + 86_400_000).session_id
    return Memory(store, index, turn_ids, rows, current, time.perf_counter() - started)


# --- quality -------------------------------------------------------------------------------


def rank_of(ids: Sequence[str], text_id: str | None) -> int | None:
    """1-based position of `text_id` in `ids`, or None."""
    return ids.index(text_id) + 1 if text_id in ids else None


def ranked_ids(
    memory: Memory, recall: Recall, embedder: Any, question: str, mode: str, k: int
) -> tuple[list[str], set[str]]:
    """Turn ids best first for one mode, and the session ids of recalled summaries."""
    if mode == "bm25-raw":
        return [
            i
            for i, _ in memory.store.search_turns_text(question, k, exclude_session=memory.current)
        ], set()
    if mode == "vector-raw":
        vector = embed_query(embedder, question)
        hits = memory.index.search("turns", vector, k, exclude_session=memory.current)
        return [h.text_id for h in hits], set()
    result = recall.search(question, memory.current, mode=mode, conv_num=k)
    return [t.text_id for t in result.turns][:k], {s.session_id for s in result.summaries}


def evaluate(
    memory: Memory, recall: Recall, embedder: Any, queries: list[BenchQuery], k: int
) -> dict[str, list[Outcome]]:
    """Each question in each mode: the rank of its answer among the top `k` turns."""
    session_of = {text_id: sid for _, text_id, sid, _, _ in memory.rows}
    out: dict[str, list[Outcome]] = {m: [] for m in MODES + RAW}
    for q in queries:
        answer = memory.turn_ids[(q.session_key, q.turn_index)]
        needed = [memory.turn_ids[t] for t in q.supporting()]
        stale = [memory.turn_ids[s] for s in q.stale]
        distractors = {memory.turn_ids[d] for d in q.distractors}
        for mode in out:
            ids, sessions = ranked_ids(memory, recall, embedder, q.question, mode, k)
            stale_ranks = [r for r in (rank_of(ids, s) for s in stale) if r is not None]
            ranks = [rank_of(ids, t) for t in needed]
            found = [r for r in ranks if r is not None]
            out[mode].append(
                Outcome(
                    q.kind,
                    min(found) if found else None,
                    ranks,
                    min(stale_ranks) if stale_ranks else None,
                    bool(ids) and ids[0] in distractors,
                    session_of[answer] in sessions,
                )
            )
    return out


def share_within(o: Outcome, k: int) -> float:
    """The share of the turns the answer needs that rank in the first `k`."""
    return sum(1 for r in o.ranks if r is not None and r <= k) / len(o.ranks)


def metrics(outcomes: Sequence[Outcome], k: int) -> tuple[float, float, float]:
    """(recall@5, recall@k, MRR@k) of some outcomes: R@k is the share of the supporting turns
    found (one or none for most questions), MRR the reciprocal rank of the first."""
    if not outcomes:
        return 0.0, 0.0, 0.0
    n = len(outcomes)
    at5 = sum(share_within(o, 5) for o in outcomes) / n
    atk = sum(share_within(o, k) for o in outcomes) / n
    mrr = sum(1 / o.rank for o in outcomes if o.rank is not None) / n
    return at5, atk, mrr


def prompt_shares(
    memory: Memory, recall: Recall, queries: list[BenchQuery]
) -> list[tuple[str, float, int, int]]:
    """For each question, as chat would recall it: (kind, share of its supporting turns in
    the prompt's passages, what they cost in tokens, how many turns they hold)."""
    out = []
    for q in queries:
        needed = {memory.turn_ids[t] for t in q.supporting()}
        result = recall.search(q.question, memory.current)
        shown = {t.text_id for t in result.prompt_turns()}
        out.append((q.kind, len(needed & shown) / len(needed), result.tokens, len(shown)))
    return out


def print_prompt(budget: str, rows: list[tuple[str, float, int, int]]) -> None:
    """R@prompt, mean tokens and turns per kind, for one budget."""
    groups = [(k, [r for r in rows if r[0] == k]) for k in KINDS] + [("all", rows)]
    cells = []
    for _, group in groups:
        n = max(len(group), 1)
        share, tokens = sum(r[1] for r in group) / n, sum(r[2] for r in group) / n
        cells.append(f"{share:>10.2f}{tokens:>6.0f}{sum(r[3] for r in group) / n:>6.0f}")
    print(f"{budget:<12}" + "".join(cells))


def newest_above_stale(o: Outcome) -> bool:
    """The newest version was recalled, and ranks above any outdated one."""
    return o.rank is not None and (o.stale_rank is None or o.rank < o.stale_rank)


def print_quality(results: dict[str, list[Outcome]], k: int) -> None:
    """Recall@5 / recall@k / MRR per mode and kind; then changed facts and near misses."""
    kinds = [o.kind for o in results["hybrid"]]
    groups = [(kind, [i for i, x in enumerate(kinds) if x == kind]) for kind in KINDS]
    groups.append(("all", list(range(len(kinds)))))
    print(f"\nRecall of the answering turn: R@5  R@{k}  MRR@{k}")
    print(f"{'mode':12}" + "".join(f"{f'{name} ({len(idx)})':>22}" for name, idx in groups))
    for mode, outcomes in results.items():
        cells = (metrics([outcomes[i] for i in idx], k) for _, idx in groups)
        print(f"{mode:12}" + "".join(f"{a:>10.2f}{b:>6.2f}{c:>6.2f}" for a, b, c in cells))
    print(f"\nChanging facts: the newest version is expected; top {k}")
    print(f"{'mode':12}{'newest found':>14}{'stale found':>14}{'newest above stale':>20}")
    for mode, outcomes in results.items():
        changed = [o for o in outcomes if o.kind == "changed"]
        n = len(changed)
        found = sum(o.rank is not None for o in changed)
        stale = sum(o.stale_rank is not None for o in changed)
        above = sum(newest_above_stale(o) for o in changed)
        print(f"{mode:12}{f'{found}/{n}':>14}{f'{stale}/{n}':>14}{f'{above}/{n}':>20}")
    print("\nNear misses, and stage one (the answer's session among the 3 recalled summaries)")
    print(f"{'mode':12}{'distractor ranked 1st':>24}{'answer session recalled':>26}")
    for mode in MODES:
        outcomes, n = results[mode], len(results[mode])
        first = sum(o.distractor_first for o in outcomes)
        found = sum(o.session_found for o in outcomes)
        print(f"{mode:12}{f'{first}/{n}':>24}{f'{found}/{n}':>26}")


def quality(args: argparse.Namespace, embedder: Embedder) -> None:
    """Load the dataset, index it with the real Indexer, and score every question."""
    data = build(args.seed)
    counts = ", ".join(f"{k} {sum(q.kind == k for q in data.queries)}" for k in KINDS)
    print(f"\nDataset: {len(data.sessions)} sessions, {data.turn_count()} turns, ", end="")
    print(f"{len(data.queries)} questions ({counts})")
    with tempfile.TemporaryDirectory(prefix="seelen-bench-") as tmp:
        memory = open_memory(
            Path(tmp), data.sessions, embedder.dim, embedder.model_id, not args.no_summaries
        )
        started = time.perf_counter()
        done = Indexer(memory.store, memory.index, embedder).index_all(
            lambda d, t: log(f"  indexed {d}/{t}") if d % 320 == 0 else None
        )
        seconds = time.perf_counter() - started
        rate = done / seconds
        print(f"Indexed {done} texts in {seconds:.1f} s ({rate:.0f} texts/s; {load_avg()})")
        weights = None if args.session_weight is None else in_session_weights(args.session_weight)
        recall = Recall(
            memory.store,
            memory.index,
            embedder,
            session_num=3,
            conv_num=args.conv_num,
            token_budget=args.tokens,
            weights=weights,
            clock=BenchClock(memory.store.get_session(memory.current).start_ms),
        )
        tune(recall, args)
        context = recall.context
        for without in args.without.split("/"):
            leave_out(recall, without)
            print(f"\n== without: {without or 'nothing'} ==")
            recall.token_budget, recall.conv_num, recall.context = (
                args.tokens,
                args.conv_num,
                context,
            )
            results = evaluate(memory, recall, embedder, data.queries, args.conv_num)
            print_quality(results, args.conv_num)
            if args.verbose:
                print_misses(data, results, args.conv_num)
            print_prompts(memory, recall, data, args)
        memory.store.close()


def print_prompts(memory: Memory, recall: Recall, data: Dataset, args: argparse.Namespace) -> None:
    """R@prompt per category for each passage rule and budget asked for."""
    print("\nR@prompt (share of supporting turns in chat's prompt), tokens, turns")
    print(f"{'budget':12}" + "".join(f"{k:>22}" for k in (*KINDS, "all")))
    for context in args.context.split(","):
        print(f"context {context}")
        for given in args.prompt_tokens.split(","):
            budget, _, cap = given.partition(":")  # "960:20": 960 tokens, at most 20 turns
            recall.token_budget, recall.conv_num = int(budget), int(cap or args.prompt_cap)
            recall.context = context
            print_prompt(given, prompt_shares(memory, recall, data.queries))


def add_variant_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the variants under measurement (read by `tune` and the R@prompt loops)."""
    parser.add_argument("--bm25-weight", type=float, default=1.0, help="scales the BM25 votes")
    parser.add_argument(
        "--bm25-floor", type=float, help="BM25 hits kept: at least this share of the best score"
    )
    parser.add_argument(
        "--context", default="brief", help="passage rules (passages.CONTEXTS), comma-separated"
    )
    parser.add_argument("--candidates", type=int, help="turns each ranker hands to fusion")
    parser.add_argument(
        "--similar", type=float, help="cosine above which a newer statement supersedes"
    )
    parser.add_argument(
        "--near-share", type=float, help="share of a strong turn's score its neighbours gain"
    )
    parser.add_argument(
        "--best-sessions", type=int, help="sessions searched again after the direct searches"
    )
    parser.add_argument(
        "--whole-sessions", type=int, help="sessions ranked as wholes and searched inside"
    )
    parser.add_argument(
        "--without",
        default="",
        help="ranking changes left out, comma-separated: shares (BM25 votes by word share), "
        "lift (questions about the assistant's words), zh-days (Chinese dates as days), "
        "near (neighbours of strong turns lifted), newer (a newer similar statement first), "
        "tense (a present-tense question about the user asks about the present), "
        "names (a question embedded without the names most turns hold), "
        "inside (the other turns of the best sessions appended), whole (the turns of the "
        "sessions ranked best as wholes lifted); "
        "several variants separated by '/', each measured on the same index",
    )


def tune(recall: Recall, args: argparse.Namespace) -> None:
    """A ranking variant under measurement: BM25's votes scaled, its floor moved
    (`leave_out` leaves changes out)."""
    for name in [*recall.weights, "bm25"]:
        if name.startswith("bm25"):
            recall.weights[name] = recall.weights.get(name, 1.0) * args.bm25_weight
    if args.bm25_floor is not None:
        recall.bm25_floor = args.bm25_floor
    if args.candidates is not None:
        recall.candidates = args.candidates
    if args.similar is not None:
        changes.SUPERSEDE_SIMILAR = args.similar
    if args.near_share is not None:
        recall.near_share = args.near_share
    if args.best_sessions is not None:
        recall.best_sessions = args.best_sessions
    if args.whole_sessions is not None:
        recall.whole_sessions = args.whole_sessions
    _TUNED[id(recall)] = (recall.near_share, recall.best_sessions, recall.whole_sessions)


CHANGES = (
    "shares",
    "lift",
    "zh-days",
    "near",
    "newer",
    "tense",
    "names",
    "inside",
    "whole",
    "speaker",
)
# Each recall's neighbour share and best sessions as tuned, put back by leave_out.
_TUNED: dict[int, tuple[float, int, int]] = {}
_ASKS_ASSISTANT = recall_module.asks_assistant
_ZH_DATE = when._ZH_DATE


def leave_out(recall: Recall, without: str) -> None:
    """Leave the named ranking changes (comma-separated, of CHANGES) out of `recall`, and
    put the others back: the ranking as it was before each, measured on the same index."""
    names = set(filter(None, without.split(",")))
    if names - set(CHANGES):
        raise SystemExit(f"--without: unknown {sorted(names - set(CHANGES))}, not of {CHANGES}")
    if "shares" in names:  # every BM25 vote whole, as before
        recall._shares = lambda query, lists: None  # type: ignore[assignment,method-assign]
    else:
        vars(recall).pop("_shares", None)
    asks = (lambda question: False) if "lift" in names else _ASKS_ASSISTANT
    recall_module.asks_assistant = asks  # type: ignore[assignment]
    # Before: "5月2号" named the month alone.
    month = re.compile(r"(十[一二]|[一二三四五六七八九十]|1[0-2]|[1-9])月()")
    when._ZH_DATE = month if "zh-days" in names else _ZH_DATE
    tuned = (recall.near_share, recall.best_sessions, recall.whole_sessions)
    near, best, whole = _TUNED.get(id(recall), tuned)
    recall.near_share = 0.0 if "near" in names else near
    recall.best_sessions = 0 if "inside" in names else best
    recall.whole_sessions = 0 if "whole" in names else whole
    recall.names = "names" not in names
    recall.supersede = "newer" not in names
    recall.speaker = "speaker" not in names
    changes.PRESENT_TENSE = "tense" not in names


class BenchClock(Clock):
    """The clock of the bench's current session (UTC), so "last week" means the same each run."""

    def __init__(self, now_ms: int) -> None:
        super().__init__("UTC")
        self.now_ms = now_ms

    def now(self) -> datetime:
        """The current session's start."""
        return self.at(self.now_ms)


def in_session_weights(weight: float) -> dict[str, float]:
    """Fusion weights for the searches inside the sessions whose summaries matched."""
    return {"bm25_in_sessions": weight, "vector_in_sessions": weight}


def print_misses(data: Dataset, results: dict[str, list[Outcome]], k: int) -> None:
    """Questions whose answer the hybrid pipeline missed, with the raw rankers' ranks."""
    print(f"\nHybrid misses (not in top {k}) with each ranker's rank of the answer:")
    for i, q in enumerate(data.queries):
        o = results["hybrid"][i]
        if None in o.ranks:
            ranks = " ".join(f"{m}={results[m][i].ranks}" for m in ("bm25", "vector", *RAW))
            print(f"  [{q.kind}] {q.question!r}: {ranks}")


# --- speed ---------------------------------------------------------------------------------


def embed_pool(embedder: Embedder, texts: Iterable[str], size: int) -> dict[str, np.ndarray]:
    """Real vectors for up to `size` distinct texts, embedded once for every size."""
    pool = list(dict.fromkeys(texts))[:size]
    started = time.perf_counter()
    vectors = embedder.embed(pool)
    log(f"  embedded a pool of {len(pool)} texts in {time.perf_counter() - started:.1f} s")
    return dict(zip(pool, vectors, strict=True))


def insert_vectors(memory: Memory, pool: dict[str, np.ndarray]) -> None:
    """Every stored text into LanceDB: its own vector if pooled, else a borrowed one."""
    borrowed = list(pool.values())
    for kind in ("turns", "summaries"):
        rows = [r for r in memory.rows if r[0] == kind]
        for start in range(0, len(rows), CHUNK):
            chunk = rows[start : start + CHUNK]
            vectors = [
                pool.get(text, borrowed[(start + j) % len(borrowed)])
                for j, (_, _, _, _, text) in enumerate(chunk)
            ]
            memory.index.add(
                kind,
                [
                    VectorRow(tid, sid, ts, v)
                    for (_, tid, sid, ts, _), v in zip(chunk, vectors, strict=True)
                ],
            )
            memory.store.mark_indexed([r[1] for r in chunk])


def speed_queries(data: Dataset, n: int, seed: int) -> list[str]:
    """`n` queries: half the dataset's questions (drawn at random), half chit-chat-like
    random lines, so both kinds are timed whatever the size of the question set."""
    rng = random.Random(seed)
    asked = [q.question for q in data.queries]
    questions = rng.sample(asked, min(len(asked), n - n // 2))
    while len(questions) < n:
        lead = rng.choice(["", "Do you remember? ", "What did I say about this: "])
        questions.append(lead + chit_chat(rng))
    rng.shuffle(questions)
    return questions


def time_queries(
    recall: Recall, embedder: Embedder, questions: list[str], current: str
) -> dict[str, list[float]]:
    """Milliseconds per query for each mode (modes interleaved, so load spikes hit all alike)."""
    for q in questions[:5]:  # warm-up: model, caches, LanceDB file handles
        recall.search(q, current, mode="hybrid")
    times: dict[str, list[float]] = {m: [] for m in ("embed only", *MODES)}
    for q in questions:
        started = time.perf_counter()
        embed_query(embedder, q)
        times["embed only"].append((time.perf_counter() - started) * 1000)
        for mode in MODES:
            started = time.perf_counter()
            recall.search(q, current, mode=mode)
            times[mode].append((time.perf_counter() - started) * 1000)
    return times


def print_latency(size: int, times: dict[str, list[float]], short: list[bool]) -> None:
    """Median, p95, p99 and max per mode; medians for short questions and chit-chat apart."""
    print(f"{'turns':>10}  {'mode':11}{'median':>8}{'p95':>8}{'p99':>8}{'max':>8}", end="")
    print(f"{'med. questions':>16}{'med. chit-chat':>16}   (ms, {len(short)} queries)")
    for mode, ms in times.items():
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        asked = np.median([t for t, s in zip(ms, short, strict=True) if s])
        chat = np.median([t for t, s in zip(ms, short, strict=True) if not s])
        print(f"{size:>10,}  {mode:11}{p50:>8.1f}{p95:>8.1f}{p99:>8.1f}{max(ms):>8.1f}", end="")
        print(f"{asked:>16.1f}{chat:>16.1f}")


class StagedRecall(Recall):
    """Chat's recall, timing its stages: the passages (neighbours looked up, the budget
    filled, each time `_turns` fills them), the word shares that weigh BM25's votes, and the
    second round in the best sessions (when the ranking ran out before the prompt: their
    turns looked up, searched, and appended): wall time, and the thread's CPU time, which a
    busy machine inflates far less."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stages: dict[str, tuple[list[float], list[float]]] = {
            "passage": ([], []),
            "word-share": ([], []),
            "inside": ([], []),
        }

    def _timed(self, stage: str, run: Any, *args: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return run(*args)
        finally:
            wall, used = self.stages[stage]
            wall.append((time.perf_counter() - started) * 1000)
            used.append((time.thread_time() - cpu) * 1000)

    def _turns(self, items: Any, limit: Any, fill: Any) -> Any:
        return self._timed("passage", super()._turns, items, limit, fill)

    def _more(self, fused: Any, vector: Any, ranked: Any, notices: Any, reads: Any) -> Any:
        return self._timed("inside", super()._more, fused, vector, ranked, notices, reads)

    def _shares(self, query: str, lists: Any) -> dict[str, float]:
        if not any(hits for name, hits in lists.items() if name.startswith("bm25")):
            return super()._shares(query, lists)  # nothing to weigh (the vector mode)
        result: dict[str, float] = self._timed("word-share", super()._shares, query, lists)
        return result


def print_time_stage(memory: Memory, embedder: Embedder, data: Dataset, conv_num: int) -> None:
    """The cost of searching inside a named time: hybrid recall of the questions that name
    a day, with and without that stage (interleaved)."""
    clock = BenchClock(memory.store.get_session(memory.current).start_ms)
    made = {
        "with": Recall(memory.store, memory.index, embedder, conv_num=conv_num, clock=clock),
        "without": Recall(
            memory.store, memory.index, embedder, conv_num=conv_num, clock=clock, time_sessions=0
        ),
    }
    asked = [q.question for q in data.queries if q.kind == "time"]
    times: dict[str, list[float]] = {name: [] for name in made}
    for q in asked * 3:
        for name, recall in made.items():
            started = time.perf_counter()
            recall.search(q, memory.current)
            times[name].append((time.perf_counter() - started) * 1000)
    cells = [
        f"{n}: median {np.median(t):.1f}, p95 {np.percentile(t, 95):.1f}" for n, t in times.items()
    ]
    print(f"{'':12}named-day questions ({len(asked)}), in-time search " + "; ".join(cells) + " ms")


def fill_size(
    data: Dataset,
    pool: dict[str, np.ndarray],
    directory: Path,
    dim: int,
    model_id: str,
    summaries: bool = True,
) -> Memory:
    """A store and index holding all of `data`, in the state the app keeps after a re-index."""
    memory = open_memory(directory, data.sessions, dim, model_id, summaries)
    started = time.perf_counter()
    insert_vectors(memory, pool)
    # As after a re-index: compact, build the ANN index, load it into memory.
    memory.index.maintain()
    memory.index.warm()
    print(f"\n{data.turn_count():,} turns in {len(data.sessions):,} sessions: ", end="")
    print(f"SQLite load {memory.load_seconds:.1f} s, LanceDB insert + index ", end="")
    print(f"{time.perf_counter() - started:.1f} s; {load_avg()}")
    return memory


def speed(args: argparse.Namespace, embedder: Embedder) -> None:
    """Latency of recall at each size, query embedding included."""
    base = build(args.seed)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    scaled = {size: scale(base, size, args.seed) for size in sizes}
    # The dataset's own texts always get their real vectors; fillers fill the rest of the pool.
    own = {t.text for s in base.sessions for t in s.turns} | {s.summary for s in base.sessions}
    fillers = [t.text for s in scaled[max(sizes)].sessions for t in s.turns] if sizes else []
    pool = embed_pool(embedder, [*sorted(own), *fillers], max(args.pool, len(own)))
    questions = speed_queries(base, args.queries, args.seed)
    short = [q in {x.question for x in base.queries} for q in questions]
    print("\nRecall latency (chat's budget and passages), query embedding included; ", end="")
    print(f"{len(pool)} pooled vectors, {os.cpu_count()} cores")
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="seelen-bench-") as tmp:
            memory = fill_size(
                scaled[size],
                pool,
                Path(tmp),
                embedder.dim,
                embedder.model_id,
                not args.no_summaries,
            )
            clock = BenchClock(memory.store.get_session(memory.current).start_ms)
            # Chat's recall: its default budget and cap, passages included.
            for without in args.without.split("/"):
                recall = StagedRecall(memory.store, memory.index, embedder, clock=clock)
                leave_out(recall, without)
                print(f"{'':12}without: {without or 'nothing'}; {load_avg()}")
                times = time_queries(recall, embedder, questions, memory.current)
                print_latency(size, times, short)
                for stage, (wall, used) in recall.stages.items():
                    for name, ms in (("wall", wall), ("CPU", used)):
                        if ms:
                            print(
                                f"{'':12}{stage} stage ({name}): median {np.median(ms):.1f}, ",
                                end="",
                            )
                            print(f"p95 {np.percentile(ms, 95):.1f} ms")
            print_time_stage(memory, embedder, base, args.conv_num)
            print(f"{'':12}after: {load_avg()}")
            memory.store.close()


def resolve(provider: str, seed: int) -> str:
    """`auto` as a profile holding the dataset would resolve it (seelen/models/languages.py)."""
    if provider != "auto":
        return provider
    turns = [t for s in build(seed).sessions for t in s.turns if t.role == "user"]
    texts = [t.text[:SAMPLE_CHARS] for t in sorted(turns, key=lambda t: -t.ts_ms)]
    return "multilingual" if needs_multilingual(texts[:SAMPLE_TURNS]) else "local"


def main(argv: list[str] | None = None) -> None:
    """Parse flags and run the chosen parts (both when none is chosen)."""
    global HELD_ROWS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", action="store_true", help="recall@k and MRR per mode")
    parser.add_argument("--speed", action="store_true", help="latency at --sizes stored turns")
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated turn counts")
    parser.add_argument(
        "--no-summaries", action="store_true", help="sessions without summaries (an import)"
    )
    parser.add_argument(
        "--conv-num", type=int, default=10, help="turns recalled (the k of recall@k)"
    )
    parser.add_argument(
        "--tokens", type=int, default=100_000, help="recall token budget (large: count-bound)"
    )
    parser.add_argument(
        "--session-weight", type=float, help="weight of in-session searches (default: Recall's)"
    )
    parser.add_argument(
        "--prompt-tokens",
        default="1500",
        help="budgets for R@prompt, comma-separated; BUDGET:CAP also caps the turns",
    )
    parser.add_argument("--prompt-cap", type=int, default=100, help="turn cap for R@prompt")
    add_variant_flags(parser)
    parser.add_argument("--queries", type=int, default=200, help="queries timed per size")
    parser.add_argument(
        "--pool", type=int, default=2000, help="distinct texts embedded for the speed part"
    )
    parser.add_argument(
        "--held-rows",
        type=int,
        default=HELD_ROWS,
        help="main vector tables searched in memory up to this many rows (0: by LanceDB)",
    )
    parser.add_argument(
        "--through",
        default="default",
        choices=tuple(THROUGH),
        help="main vector tables searched through their HNSW graph, or by LanceDB alone",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--embedder",
        default="auto",
        choices=("auto", "local", "multilingual"),
        help="local model (auto: chosen from the dataset's user turns, as for a profile)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list the hybrid misses")
    args = parser.parse_args(argv)
    HELD_ROWS = args.held_rows
    INDEX_OPTIONS.update(THROUGH[args.through])
    both = not (args.quality or args.speed)
    embedder = make_embedder(resolve(args.embedder, args.seed), "", "", "")
    print(f"Seelen recall bench: {embedder.model_id}, conv_num={args.conv_num}; {load_avg()}")
    if args.quality or both:
        quality(args, embedder)
    if args.speed or both:
        speed(args, embedder)


if __name__ == "__main__":
    main()
