"""What an MCP server costs a question that calls no tool: in-process `seelen ask` and a
piped chat, with `mcp-server-time` configured, without and with its cached tool list.

    .venv/bin/python bench/bench_mcp_lazy.py [--runs 5]

One OpenAI-protocol server on 127.0.0.1 answers at once. `SEELEN_OWNER=false`, so each ask
opens the profile in its own process (the fallback when no warm owner can answer). "no
cache" deletes the profile's mcp_tools.json before each run, which is what every run did
before the cache: start the server and wait for its handshake. Prints the median and range
of wall and CPU seconds per case, and how many server processes were started.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_server import ModelServer  # noqa: E402

MARKER_SERVER = """
import os, runpy, sys
with open(os.environ["MARKER"], "a") as f:
    f.write("x")
sys.argv = ["mcp-server-time", "--local-timezone", "UTC"]
runpy.run_module("mcp_server_time", run_name="__main__")
"""


def one(cmd: list[str], env: dict[str, str], stdin: str | None) -> tuple[float, float]:
    """(wall, cpu) seconds of one command, children included."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(cmd, env=env, input=stdin, text=True, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def main() -> None:
    """Parse --runs and print the numbers."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with ModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "time_server.py").write_text(MARKER_SERVER)
        marker = folder / "starts"
        script = str(folder / "time_server.py")
        entry = {"command": "python", "args": [script], "env": {"MARKER": str(marker)}}
        (folder / "mcp_servers.json").write_text(json.dumps({"mcpServers": {"time": entry}}))
        env = {
            **os.environ,
            "SEELEN_DATA_DIR": str(folder / "data"),
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "bench",
            "CHAT_MODEL": "bench",
            "SEELEN_OWNER": "false",
        }
        os.chdir(folder)
        cache = folder / "data" / "default" / "mcp_tools.json"
        ask = [sys.executable, "-m", "seelen", "ask", "--ephemeral", "hello"]
        chat = [sys.executable, "-m", "seelen", "chat"]
        cases = [("ask", ask, None), ("piped chat", chat, "hello\n")]
        print(f"load: {os.getloadavg()[0]:.2f}; {runs} runs per case")
        for name, cmd, stdin in cases:
            for cached in (False, True):
                one(cmd, env, stdin)  # warm the file cache; writes the tool list
                marker.write_text("")
                walls, cpus = [], []
                for _ in range(runs):
                    if not cached:
                        cache.unlink(missing_ok=True)
                    wall, cpu = one(cmd, env, stdin)
                    walls.append(wall)
                    cpus.append(cpu)
                label = f"{name}, {'cached list' if cached else 'no cache'}"
                print(
                    f"{label:<24} wall {statistics.median(walls):.2f} s "
                    f"({min(walls):.2f}-{max(walls):.2f}), cpu {statistics.median(cpus):.2f} s, "
                    f"server started {len(marker.read_text())}/{runs}"
                )


if __name__ == "__main__":
    main()
