"""`seelen mcp` as an MCP client sees it, with 10,000 turns stored and a warm owner.

    .venv/bin/python bench/bench_mcp_server.py [--stored 10000] [--starts 5] [--searches 200]

Fills a profile with the synthetic history of recall_data.py (as bench_turn.py does), starts
the profile's owner, then measures, through the official MCP SDK client:
- start: from spawning `seelen mcp` (stdio) to the answer of `tools/list` (goal ≤ 1 s);
- search_memory round trips over stdio and over HTTP (`--http`, bearer token), median and
  p95 (goal p95 ≤ 50 ms);
- peak RSS of the `seelen mcp` process (VmHWM; goal ≤ 100 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from model_server import ModelServer, Reply  # noqa: E402

from seelen.client.procs import children, cpu_seconds  # noqa: E402

SEELEN = str(Path(sys.executable).with_name("seelen"))
# An SSE read may wait for a fresh owner to open the profile (httpx waits 5 s by default).
LONG = httpx2.Timeout(30, read=120)


def fill_profile(stored: int) -> list[str]:
    """The synthetic history in the profile named by the environment; its questions."""
    from bench_turn import fill

    from seelen.app import build_app
    from seelen.config import load_settings

    app = build_app(load_settings())
    try:
        return fill(app, stored)
    finally:
        asyncio.run(app.aclose())


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def mcp_children() -> list[int]:
    """Pids of this process's `seelen mcp` children."""
    return [
        p
        for p in children(os.getpid())
        if b"mcp" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
    ]


async def stdio_run(
    questions: list[str],
    starts: int,
    searches: int,
    command: str = SEELEN,
    env: dict[str, str] | None = None,
    *,
    shown: bool = True,
) -> dict[str, list[float]]:
    """`starts` starts of `command mcp` over stdio, each to `tools/list` answered (with
    `searches` search_memory calls in the first); returns the start times (ms), the servers'
    CPU by then (ms) and their peak RSS (MiB). `shown`: the measures printed and the
    server's stderr passed on; otherwise nothing is printed (a caller's table prints its
    own row) and the server's stderr ("seelen mcp: serves …" at each start) is dropped."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=["mcp"], env=env or dict(os.environ))
    start_times, start_cpu, round_trips, rss = [], [], [], []
    with contextlib.ExitStack() as stack:
        errlog = sys.stderr if shown else stack.enter_context(open(os.devnull, "w"))
        for run in range(starts):
            t0 = time.perf_counter()
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await session.list_tools()
                start_times.append(time.perf_counter() - t0)
                start_cpu += [cpu_seconds(pid) * 1000 for pid in mcp_children()]
                if run == 0 and searches:
                    round_trips = await _searches(session, questions, searches)
                rss += [peak_rss_mib(pid) for pid in mcp_children()]
    if shown:
        print(line("start to tools/list answered (stdio)", [t * 1000 for t in start_times], "ms"))
        print(line("  its CPU (user + system) by then", start_cpu, "ms"))
        if round_trips:
            print(line("search_memory round trip (stdio)", round_trips, "ms"))
        print(f"{'seelen mcp peak RSS (VmHWM)':<40} max {max(rss):6.1f} MiB over {len(rss)} runs")
    return {"start": [t * 1000 for t in start_times], "cpu": start_cpu, "rss": rss}


async def _searches(session: Any, questions: list[str], searches: int) -> list[float]:
    """`searches` search_memory round trips (ms), after five that warm the owner's recall."""
    round_trips = []
    for i in range(searches + 5):
        t1 = time.perf_counter()
        result = await session.call_tool("search_memory", {"query": questions[i % len(questions)]})
        assert not result.is_error, result.content
        if i >= 5:
            round_trips.append((time.perf_counter() - t1) * 1000)
    return round_trips


async def http_run(questions: list[str], searches: int) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([SEELEN, "mcp", "--http", "--port", str(port)])
    token = subprocess.run(
        [SEELEN, "mcp", "token"], capture_output=True, text=True, check=True
    ).stdout.strip()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        while True:
            try:
                httpx2.get(url, timeout=1)
                break
            except httpx2.TransportError:
                await asyncio.sleep(0.05)
        round_trips = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=LONG) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for i in range(searches + 5):
                t1 = time.perf_counter()
                result = await session.call_tool(
                    "search_memory", {"query": questions[i % len(questions)]}
                )
                assert not result.is_error, result.content
                if i >= 5:
                    round_trips.append((time.perf_counter() - t1) * 1000)
        print(line("search_memory round trip (HTTP)", round_trips, "ms"))
        print(f"{'seelen mcp --http peak RSS (VmHWM)':<40} {peak_rss_mib(process.pid):6.1f} MiB")
    finally:
        process.terminate()
        process.wait(timeout=30)


def line(label: str, values: list[float], unit: str) -> str:
    values = sorted(values)
    p95 = values[max(0, math.ceil(len(values) * 0.95) - 1)]  # nearest rank: of 2, the larger
    return (
        f"{label:<40} median {statistics.median(values):7.1f} {unit}   "
        f"p95 {p95:7.1f} {unit}   max {values[-1]:7.1f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stored", type=int, default=10_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    with ModelServer(lambda body: Reply(text="ok")) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ.update(
            {
                "OPENAI_BASE_URL": server.url,
                "OPENAI_API_KEY": "sk-bench",
                "CHAT_MODEL": "test-model",
                "SEELEN_DATA_DIR": tmp,
                "ENABLE_MCP": "false",
                "EMBEDDING_PROVIDER": "local",
                "SEELEN_OWNER": "true",
            }
        )
        os.chdir(tmp)
        t0 = time.perf_counter()
        questions = fill_profile(args.stored)
        print(f"stored {args.stored:,} turns in {time.perf_counter() - t0:.1f} s")
        from seelen.client import connect, place
        from seelen.config import load_settings
        from seelen.protocol import calls

        settings = load_settings()
        sock = connect.connect(settings)  # the warm owner
        assert sock is not None
        sock.close()
        try:
            asyncio.run(stdio_run(questions, args.starts, args.searches))
            asyncio.run(http_run(questions, args.searches))
        finally:
            connect.request(place.socket_path(settings), calls.Stop())
        print(f"load average: {os.getloadavg()[0]:.2f} (2 cores)")


if __name__ == "__main__":
    main()
