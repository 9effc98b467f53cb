"""Start-up: `seelen ask` from process start until its request reaches the model server.

    .venv/bin/python bench/bench_startup.py [--runs 10]

Runs the real command against a local OpenAI-protocol server, twice: with an empty memory,
and with a memory of archived sessions (so recall embeds the query and searches LanceDB).
Prints the median and spread; the goal is a median under 0.8 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_server import ModelServer, Reply  # noqa: E402


class Stamp:
    """Remembers when each chat request arrived."""

    def __init__(self) -> None:
        self.arrived: list[float] = []
        self.event = threading.Event()

    def __call__(self, body: dict) -> Reply:
        if "messages" in body:
            self.arrived.append(time.perf_counter())
            self.event.set()
        return Reply(text="ok")


def one_run(env: dict[str, str], stamp: Stamp) -> float:
    stamp.event.clear()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "seelen", "ask", "--json", "hello there"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if not stamp.event.wait(30):
        proc.kill()
        raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "no request")
    elapsed = stamp.arrived[-1] - start
    proc.wait(30)
    return elapsed


def seed_memory(env: dict[str, str]) -> None:
    """Archive a few sessions so the next ask runs the full recall (embedder + LanceDB)."""
    for i in range(3):
        script = f"my hobby number {i} is sailing on lake {i}\n/save\n"
        subprocess.run(
            [sys.executable, "-m", "seelen", "chat"],
            input=script.encode(),
            env=env,
            check=True,
            capture_output=True,
        )


def report(label: str, times: list[float]) -> None:
    ms = sorted(t * 1000 for t in times)
    print(
        f"{label:<34} median {statistics.median(ms):7.0f} ms   min {ms[0]:6.0f}   "
        f"max {ms[-1]:6.0f}   (n={len(ms)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    stamp = Stamp()
    with ModelServer(responder=stamp) as server, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "sk-bench",
            "CHAT_MODEL": "test-model",
            "SEELEN_DATA_DIR": tmp,
            "ENABLE_MCP": "false",
        }
        one_run(env, stamp)  # warm the OS file cache once
        report("empty memory", [one_run(env, stamp) for _ in range(args.runs)])
        seed_memory(env)
        report("with archived sessions (recall)", [one_run(env, stamp) for _ in range(args.runs)])
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
