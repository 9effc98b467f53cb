"""The quick rows of the scale table (bench_scale.py), measured from outside on one install.

Each row runs the `seelen` command it is given (this venv's, or another install's: a
worktree of an older commit with its own venv), on a profile that command imported itself
(`seelen import` of bench_import.py's ChatGPT export), so an older version reads only what
it wrote. Rows reuse the other benches' functions: bench_ask.compare (`ask` against
simonw/llm), bench_mcp_server.stdio_run (`seelen mcp` to tools/list), bench_owner.rss_mib,
and bench_recall.py itself, run as a process by the install's own Python from the
install's own tree. A row the install cannot do (a command or flag it lacks) prints "n/a"
with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_ask
import bench_mcp_server
import bench_owner
from bench_recall import speed_queries
from recall_data import build

QUESTION = "what did I say about my sister's wedding plans"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def environment(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEELEN_", "OPENAI_"))}
    # No bytecode written: another install's tree is only read.
    env.update(
        SEELEN_DATA_DIR=str(data_dir),
        EMBEDDING_PROVIDER="local",
        PYTHONDONTWRITEBYTECODE="1",
        **extra,
    )
    return env


def lacks(seelen: str, words: list[str], flag: str = "") -> str:
    """Why `seelen words... [flag]` cannot run on this install ("" when it can)."""
    done = subprocess.run([seelen, *words, "--help"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"this install has no `seelen {' '.join(words)}`"
    if flag and flag not in done.stdout:
        return f"`seelen {' '.join(words)}` has no {flag} here"
    return ""


def na(label: str, reason: str) -> None:
    print(f"| {label} | n/a: {reason} | | | load {load()} |", flush=True)


def ask_environment(data_dir: Path, server_url: str, **extra: str) -> dict[str, str]:
    """The environment of a command that may call the chat model (tests/model_server.py)."""
    return environment(
        data_dir,
        OPENAI_BASE_URL=server_url,
        OPENAI_API_KEY="sk-bench",
        CHAT_MODEL="test-model",
        ENABLE_MCP="false",
        **extra,
    )


def owner_pids(data_dir: Path) -> list[int]:
    """The owners serving `data_dir` (any version: `python -m seelen.owner` with that data dir
    in its environment), read from /proc."""
    found = []
    wanted = f"SEELEN_DATA_DIR={data_dir}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"seelen.owner" not in (proc / "cmdline").read_bytes():
                continue
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def stop_owner(seelen: str, env: dict[str, str]) -> None:
    subprocess.run([seelen, "server", "stop"], env=env, capture_output=True, check=False)


def questions(n: int = 200, seed: int = 7) -> list[str]:
    """bench_recall.py's speed set: half the synthetic set's questions, half chit-chat."""
    return speed_queries(build(seed), n, seed)


def search_row(seelen: str, data_dir: Path, turns: int) -> None:
    """`memory search --json --batch`, 200 questions in one process: the `ms` of each."""
    label = f"`memory search --batch`, 200 questions, per-question ms at {turns:,} turns"
    if reason := lacks(seelen, ["memory", "search"], "--batch"):
        return na(label, reason)
    before = load()
    lines = "".join(q + "\n" for q in questions())
    env = environment(data_dir, SEELEN_OWNER="false")
    done = subprocess.run(
        [seelen, "memory", "search", "--json", "--batch"],
        env=env,
        input=lines,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # another install that cannot read this profile
        return na(label, (done.stderr.strip().splitlines() or ["failed"])[-1][:200])
    ms = [json.loads(line)["ms"] for line in done.stdout.splitlines()]
    p50, p95 = np.percentile(ms, [50, 95])
    print(f"| {label} | median {p50:.1f}, p95 {p95:.1f} ms | | | load {before} |", flush=True)


def started_owner(data_dir: Path, wait: float = 15.0) -> list[int]:
    """The owners serving `data_dir`, waited for up to `wait` seconds after the `ask` that
    starts one (a client that gives up waiting hosts the question itself: none then)."""
    deadline = time.monotonic() + wait
    while not (pids := owner_pids(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return pids


def no_owner(data_dir: Path) -> str:
    """Why no owner serves `data_dir`: the last line its log holds, if any."""
    logs = sorted(data_dir.glob("*/logs/owner.log"))
    lines = logs[0].read_text(errors="replace").strip().splitlines() if logs else []
    return "no owner process serves the profile after the ask" + (
        f" (its log: {lines[-1][:160]})" if lines else " (its log is empty)"
    )


def owner_row(seelen: str, data_dir: Path, server_url: str, quiet: float) -> None:
    """The owner's RSS after one `ask` started it, and after `quiet` seconds without one."""
    label = "the owner after one `ask`"
    if reason := lacks(seelen, ["server", "stop"]):
        return na(label, reason)
    env = ask_environment(data_dir, server_url, SEELEN_OWNER="true")
    stop_owner(seelen, env)
    subprocess.run([seelen, "ask", QUESTION], env=env, check=True, capture_output=True)
    if not (pids := started_owner(data_dir)):
        return na(label, no_owner(data_dir))
    warm = sum(bench_owner.rss_mib(p) for p in pids)
    time.sleep(quiet)
    rested = sum(bench_owner.rss_mib(p) for p in owner_pids(data_dir))
    print(
        f"| {label} | {warm} MiB RSS at once, {rested} MiB after {quiet:.0f} quiet s | | | "
        f"load {load()} |",
        flush=True,
    )


def ask_row(seelen: str, data_dir: Path, server_url: str, llm: str, runs: int) -> None:
    """`seelen ask` against simonw/llm's `llm -m`, same server, pairs in alternation."""
    label = f"`seelen ask` CPU against simonw/llm ({runs} pairs)"
    if not Path(llm).exists():
        return na(label, f"no simonw/llm at {llm} (--llm)")
    env = ask_environment(data_dir, server_url, SEELEN_OWNER="true")
    before = load()
    llm_env = bench_ask.llm_environment(data_dir.parent / "llm", server_url)
    cmd = [seelen, "ask", "hello"]
    subprocess.run(cmd, env=env, check=True, capture_output=True)  # the owner started
    if not started_owner(data_dir):
        return na(label, no_owner(data_dir))
    owner = lambda: next(iter(owner_pids(data_dir)), None)  # noqa: E731
    got = bench_ask.compare(cmd, env, llm_env, llm, runs, owner)
    med = statistics.median
    print(
        f"| {label} | {med(got['ratio cpu']):.3f}x (with the owner's "
        f"{med(got['ratio cpu with owner']):.3f}x) | {med(got['seelen cpu']):.3f} s against "
        f"{med(got['llm cpu']):.3f} s | {med(got['seelen rss']):.0f} MiB | load {before} |",
        flush=True,
    )


def mcp_row(seelen: str, data_dir: Path, server_url: str, starts: int) -> None:
    """`seelen mcp` over stdio: from its start to the answer of tools/list."""
    label = f"`seelen mcp`: start to tools/list answered ({starts} starts)"
    if reason := lacks(seelen, ["mcp"]):
        return na(label, reason)
    before = load()
    env = ask_environment(data_dir, server_url, SEELEN_OWNER="true")
    got = asyncio.run(
        bench_mcp_server.stdio_run([], starts, 0, command=seelen, env=env, shown=False)
    )
    p50, p95 = np.percentile(got["start"], [50, 95])
    print(
        f"| {label} | median {p50:.0f}, p95 {p95:.0f} ms | CPU {np.median(got['cpu']):.0f} ms "
        f"| {max(got['rss']):.0f} MiB | load {before} |",
        flush=True,
    )
    stop_owner(seelen, env)


def recall_row(seelen: str, size: int) -> None:
    """bench_recall.py --speed at `size` turns, of the install's own tree, by its Python."""
    label = f"recall at {size:,} turns, query embedding included (`bench_recall.py --speed`)"
    python = str(Path(seelen).with_name("python"))
    where = subprocess.run(
        [python, "-c", "import seelen, pathlib; print(pathlib.Path(seelen.__file__).parents[1])"],
        capture_output=True,
        text=True,
    )
    bench = Path(where.stdout.strip()) / "bench" / "bench_recall.py"
    if where.returncode != 0 or not bench.exists():
        return na(label, f"no bench/bench_recall.py beside this install's seelen ({bench})")
    before = load()
    cmd = [python, str(bench), "--speed", "--sizes", str(size), "--embedder", "local"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0 and python != sys.executable:  # its venv lacks the bench's needs
        label += f", its code by this venv's Python ({python} failed)"
        done = subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, env=env)
    if done.returncode != 0:  # a full disk, or a tree whose bench takes other flags
        return na(label, (done.stderr.strip().splitlines() or ["failed"])[-1][:200])
    modes = {
        f[1]: f[2:4]
        for line in done.stdout.splitlines()
        if len(f := line.split()) > 4
        if f[0] == f"{size:,}" and f[1] in ("hybrid", "bm25")
    }
    hybrid, bm25 = modes.get("hybrid", ["?", "?"]), modes.get("bm25", ["?", "?"])
    print(
        f"| {label} | median {hybrid[0]}, p95 {hybrid[1]} ms | bm25 alone {bm25[0]} / "
        f"{bm25[1]} | | load {before} to {load()} |",
        flush=True,
    )
