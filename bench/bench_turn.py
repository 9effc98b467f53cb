"""Overhead of one turn outside the model, with 10,000 turns stored.

    .venv/bin/python bench/bench_turn.py [--stored 10000] [--turns 40]
                                         [--embedder local|multilingual]

Fills a profile with the synthetic history of recall_data.py (real SQLite rows, real LanceDB
vectors), then runs the dataset's questions through the real ChatBot against a local
OpenAI-protocol server that answers at once. Overhead = from the start of the turn until the
request reaches the server (save, fold check, recall, prompt assembly). Goal: median < 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from model_server import ModelServer, Reply  # noqa: E402

from seelen.app import build_app  # noqa: E402
from seelen.config import load_settings  # noqa: E402
from seelen.vectors import VectorRow  # noqa: E402


def fill(app: Any, stored: int) -> list[str]:
    """The synthetic history of bench/recall_data.py (real texts, archived sessions), with
    vectors borrowed from a pool of 500 really embedded texts; returns its questions."""
    from recall_data import build, scale

    data = scale(build(), stored)
    store, index = app.store, app.recall.index
    pool_texts = [t.text for s in data.sessions[-40:] for t in s.turns][:500]
    pool = app.recall.embedder.embed(pool_texts)
    k = 0
    for bench_session in data.sessions:
        turns = bench_session.turns
        session = store.create_session(start_ms=turns[0].ts_ms)
        saved = store.add_turns(
            session.session_id, [(t.role, t.text, None, t.ts_ms) for t in turns]
        )
        summary = store.add_summary(
            session.session_id, bench_session.summary, turns[0].ts_ms, turns[-1].ts_ms
        )
        vectors = [pool[(k + i) % len(pool)] for i in range(len(saved) + 1)]
        k += len(saved) + 1
        index.add(
            "turns",
            [
                VectorRow(t.text_id, t.session_id, t.ts_ms, v)
                for t, v in zip(saved, vectors, strict=False)
            ],
        )
        index.add(
            "summaries",
            [VectorRow(summary.text_id, session.session_id, summary.start_ms, vectors[-1])],
        )
        store.mark_indexed([t.text_id for t in saved] + [summary.text_id])
        store.mark_archived(session.session_id)
    index.maintain()
    return [q.question for q in data.queries]


async def run(stored: int, turns: int, embedder: str) -> None:
    arrived: list[float] = []

    def respond(body: dict) -> Reply:
        if "messages" in body:
            arrived.append(time.perf_counter())
        return Reply(text="Sure, noted.")

    with ModelServer(responder=respond) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(
            {
                "OPENAI_BASE_URL": server.url,
                "OPENAI_API_KEY": "sk-bench",
                "CHAT_MODEL": "test-model",
                "SEELEN_DATA_DIR": tmp,
                "ENABLE_MCP": "false",
                "MAX_CONV_NUM": "1000",
                # Pinned: `auto` would pick by the stored history, which is filled afterwards.
                "EMBEDDING_PROVIDER": embedder,
            }
        )
        app = build_app(load_settings())
        t0 = time.perf_counter()
        questions = fill(app, stored)
        print(f"stored {app.store.count_turns():,} turns in {time.perf_counter() - t0:.1f} s")
        await app.open_session()
        app.start_background()
        app.recall.warm(app.sessions.current.session_id)
        pre, post, recall_ms = [], [], []
        for i in range(turns + 3):
            text = questions[i % len(questions)]
            t0 = time.perf_counter()
            async for _ in app.bot.turn(text):
                pass
            t_end = time.perf_counter()
            while app.index.pending():  # the user reads and types; indexing finishes meanwhile
                await asyncio.sleep(0.01)
            if i >= 3:  # the first turns finish loading the embedder and LanceDB
                pre.append((arrived[-1] - t0) * 1000)
                recall_ms.append(app.bot.last_recall.seconds * 1000)
                post.append((t_end - arrived[-1]) * 1000)
        await app.aclose()

    def line(label: str, values: list[float]) -> str:
        values = sorted(values)
        p95 = values[max(0, int(len(values) * 0.95) - 1)]
        return f"{label:<44} median {statistics.median(values):6.1f} ms   p95 {p95:6.1f} ms"

    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores), {turns} turns, {embedder}")
    print(line("overhead before the request (save+recall+prompt)", pre))
    print(line("  of which recall", recall_ms))
    print(line("request arrival to reply saved (incl. stream)", post))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument(
        "--embedder", default="local", choices=("local", "multilingual"), help="the model"
    )
    args = parser.parse_args()
    asyncio.run(run(args.stored, args.turns, args.embedder))


if __name__ == "__main__":
    main()
