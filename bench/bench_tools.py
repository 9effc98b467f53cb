"""Benchmark the tool layer: MCP start-up (must not block) and per-call overhead.

    .venv/bin/python bench/bench_tools.py [--calls 200] [--servers 3]

Uses mcp-server-time (`python -m mcp_server_time`) as the stdio server; nothing leaves the
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from seelen.tools.base import ToolCall, ToolRegistry
from seelen.tools.local import tool
from seelen.tools.mcp import McpManager

TIME_SERVER = {"command": "python", "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


@tool
async def noop_async() -> str:
    """Do nothing (async)."""
    return "ok"


@tool
def noop_sync() -> str:
    """Do nothing (sync: runs in a worker thread)."""
    return "ok"


class StallMeter:
    """Measures the longest time the event loop was blocked (what a prompt would feel)."""

    def __init__(self, tick: float = 0.005) -> None:
        self.tick, self.worst, self._task = tick, 0.0, None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.tick)
            self.worst = max(self.worst, time.perf_counter() - before - self.tick)

    def __enter__(self) -> StallMeter:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def startup(servers: int) -> McpManager:
    """Time start() with no servers and with `servers` stdio servers, then time to ready."""
    empty = McpManager({"mcpServers": {}}, ToolRegistry())
    began = time.perf_counter()
    empty.start()
    print(f"start() with no servers:        {1e3 * (time.perf_counter() - began):8.3f} ms")
    await empty.aclose()

    config = {"mcpServers": {f"time{i}": TIME_SERVER for i in range(1, servers + 1)}}
    manager = McpManager(config, ToolRegistry(), init_timeout=60)
    with StallMeter() as stall:
        began = time.perf_counter()
        manager.start()
        returned = time.perf_counter() - began
        ready = await manager.wait_ready(60)
        elapsed = time.perf_counter() - began
    print(f"start() with {servers} stdio servers:   {1e3 * returned:8.3f} ms")
    print(f"all {servers} ready (incl. first fastmcp import): {elapsed:6.2f} s  ({ready=})")
    print(f"longest event-loop stall meanwhile: {1e3 * stall.worst:6.1f} ms")
    for line in manager.status():
        print("   ", line.line())
    return manager


async def per_call(label: str, run: Callable[[], Awaitable[object]], calls: int) -> None:
    """Median and p90 wall time of `calls` sequential calls."""
    for _ in range(5):  # warm up
        await run()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        await run()
        times.append(time.perf_counter() - began)
    times.sort()
    median, p90 = statistics.median(times), times[int(0.9 * len(times))]
    print(f"{label:<44} median {1e3 * median:7.3f} ms   p90 {1e3 * p90:7.3f} ms")


async def main(calls: int, servers: int) -> None:
    """Run every measurement and print one line each."""
    manager = await startup(servers)
    registry = manager.registry
    registry.add(noop_async)
    registry.add(noop_sync)

    async def through(name: str, arguments: str = "{}") -> None:
        outcome = (await registry.run_all([ToolCall("1", name, arguments)]))[0]
        assert outcome.ok, outcome.content

    print(f"\nper call, {calls} calls each, through registry.run_all:")
    await per_call("local async tool", lambda: through("noop_async"), calls)
    await per_call("local sync tool (worker thread)", lambda: through("noop_sync"), calls)
    zone = '{"timezone": "Europe/Berlin"}'
    await per_call(
        "MCP stdio tool (time1_get_current_time)",
        lambda: through("time1_get_current_time", zone),
        calls,
    )
    await manager.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--servers", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.servers))
