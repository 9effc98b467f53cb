"""Overhead of one turn outside the model, with 10,000 turns stored.

    .venv/bin/python bench/bench_turn.py [--stored 10000] [--turns 40]

Fills a profile with archived sessions (real SQLite rows, real LanceDB vectors), then runs
turns through the real ChatBot against a local OpenAI-protocol server that answers at
once. Overhead = the turn's wall time minus the time the server spent answering
(measured inside the server). Goal: median under 20 ms.
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_server import ModelServer, Reply  # noqa: E402

from seelen.app import build_app  # noqa: E402
from seelen.config import load_settings  # noqa: E402
from seelen.store import now_ms  # noqa: E402
from seelen.vectors import VectorRow  # noqa: E402

WORDS = ("garden sailing bread coffee Lisbon sister meeting project running piano novel "
         "weather train rent dentist birthday recipe cat bicycle concert budget").split()


def fill(app, stored: int, rng: np.random.Generator) -> None:
    """Archived sessions of 40 turns each, with random unit vectors (fast, same shape)."""
    store, index = app.store, app.recall.index
    start = now_ms() - 90 * 86_400_000
    per = 40
    for s in range(stored // per):
        session = store.create_session(start_ms=start + s * 3_600_000)
        rows = [("user" if i % 2 == 0 else "assistant",
                 " ".join(rng.choice(WORDS, 12)), None, start + s * 3_600_000 + i * 1000)
                for i in range(per)]
        turns = store.add_turns(session.session_id, rows)
        summary = store.add_summary(session.session_id, " ".join(rng.choice(WORDS, 40)),
                                    turns[0].ts_ms, turns[-1].ts_ms)
        vectors = rng.standard_normal((per + 1, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index.add("turns", [VectorRow(t.text_id, t.session_id, t.ts_ms, v)
                            for t, v in zip(turns, vectors, strict=False)])
        index.add("summaries", [VectorRow(summary.text_id, session.session_id,
                                          summary.start_ms, vectors[-1])])
        store.mark_indexed([t.text_id for t in turns] + [summary.text_id])
        store.mark_archived(session.session_id)
    index.maintain()


async def run(stored: int, turns: int) -> None:
    served: list[float] = []

    def respond(body: dict) -> Reply:
        t0 = time.perf_counter()
        reply = Reply(text="Sure, noted.")
        served.append(time.perf_counter() - t0)
        return reply

    with ModelServer(responder=respond) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update({"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-bench",
                           "CHAT_MODEL": "test-model", "SEELEN_DATA_DIR": tmp,
                           "ENABLE_MCP": "false", "MAX_CONV_NUM": "1000"})
        app = build_app(load_settings())
        t0 = time.perf_counter()
        fill(app, stored, np.random.default_rng(1))
        print(f"stored {app.store.count_turns():,} turns in {time.perf_counter() - t0:.1f} s")
        await app.open_session()
        app.start_background()
        rng = np.random.default_rng(2)
        walls, model_times, recall_ms = [], [], []
        for i in range(turns + 3):
            text = f"tell me about my {' '.join(rng.choice(WORDS, 3))}"
            t0 = time.perf_counter()
            async for _ in app.bot.turn(text):
                pass
            wall = time.perf_counter() - t0
            if i >= 3:  # the first turns load the embedder and open LanceDB
                walls.append(wall)
                recall_ms.append(app.bot.last_recall.seconds * 1000)
        await app.aclose()
    # Time on the wire and in the server: a request to the same server with no Seelen work.
    with ModelServer(responder=lambda b: Reply(text="Sure, noted.")) as server:
        from seelen.llm import OpenAIChatModel

        model = OpenAIChatModel(base_url=server.url, api_key="x", model="test-model")
        for _ in range(turns + 3):
            t0 = time.perf_counter()
            async for _ in model.stream([{"role": "user", "content": "hi"}]):
                pass
            model_times.append(time.perf_counter() - t0)
        await model.aclose()
    model_median = statistics.median(model_times[3:])
    overhead = sorted((w - model_median) * 1000 for w in walls)
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores)")
    print(f"model round trip alone      median {model_median * 1000:6.1f} ms")
    print(f"turn wall time              median {statistics.median(walls) * 1000:6.1f} ms")
    print(f"overhead outside the model  median {statistics.median(overhead):6.1f} ms   "
          f"p95 {overhead[int(len(overhead) * 0.95) - 1]:6.1f} ms")
    print(f"  of which recall           median {statistics.median(recall_ms):6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(run(args.stored, args.turns))


if __name__ == "__main__":
    main()
