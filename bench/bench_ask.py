"""A one-shot question: `seelen ask` against simonw/llm's `llm -m`, on the same local server.

    .venv/bin/python bench/bench_ask.py [--runs 10] [--llm /path/to/llm] [--turns 1000]

Both commands talk to one OpenAI-protocol server on 127.0.0.1 that answers at once. Seelen's
profile holds `--turns` archived turns (indexed, so recall embeds the query and searches
LanceDB). Runs alternate llm / seelen; each pair gives a ratio. Per run: CPU seconds (user +
system) and peak RSS of the process the user starts (from wait4), and wall time. For Seelen
the warm owner's CPU for the same answer is shown too, read from /proc, since that work is
done on the user's behalf. Also shown: the first ask with no owner running (it starts one),
and an in-process ask (SEELEN_OWNER=false), the way every ask ran before the owner.

Install simonw/llm in its own venv first: `python3 -m venv /tmp/llmvenv &&
/tmp/llmvenv/bin/pip install llm`. Goals: CPU and wall ≤ 0.5× of llm's, peak RSS ≤ 100 MiB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_server import ModelServer, Reply  # noqa: E402

from seelen.client.procs import cpu_seconds  # noqa: E402
from seelen.config import load_settings  # noqa: E402
from seelen.store import Store  # noqa: E402


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(cpu seconds, wall seconds, peak RSS MiB) of one command, waited for with wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(
            f"{cmd[:3]} failed: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def owner_cpu(pid: int | None) -> float:
    """CPU seconds the owner process has used so far."""
    if pid is None:
        return 0.0
    return cpu_seconds(pid)


def seed(env: dict[str, str], turns: int) -> None:
    """`turns` archived turns in sessions of 20, then indexed by `seelen memory reindex`."""
    settings = load_settings(environ=env)
    settings.profile_dir.mkdir(parents=True, exist_ok=True)
    store = Store(settings.profile_dir / "chat_sessions.db")
    day = 86_400_000
    base = int(time.time() * 1000) - (turns // 20 + 2) * day
    for s in range(turns // 20):
        start = base + s * day
        session = store.create_session(start_ms=start)
        rows = [
            (
                "user" if i % 2 == 0 else "assistant",
                f"session {s} line {i}: I like topic {s * 7 % 50}",
                None,
                start + i * 60_000,
            )
            for i in range(20)
        ]
        store.add_turns(session.session_id, rows)
        store.add_summary(
            session.session_id, f"We talked about topic {s * 7 % 50}.", start, start + 19 * 60_000
        )
        store.mark_archived(session.session_id)
    store.close()
    subprocess.run(
        [sys.executable, "-m", "seelen", "memory", "reindex"],
        env=env,
        check=True,
        capture_output=True,
    )


def owner_pid(env: dict[str, str]) -> int | None:
    from seelen.client.connect import owner_status

    status = owner_status(load_settings(environ=env))
    return status.pid if status else None


def line(label: str, values: list[float], unit: str) -> str:
    return (
        f"{label:<38} median {statistics.median(values):7.3f} {unit}  "
        f"min {min(values):7.3f}  max {max(values):7.3f}"
    )


def llm_environment(home: Path, url: str) -> dict[str, str]:
    """simonw/llm's environment: a user dir in `home` whose model "fake" is the server at
    `url`."""
    home.mkdir(exist_ok=True)
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: fake\n  model_name: test-model\n  api_base: {url}\n  api_key_name: fake\n"
    )
    (home / "keys.json").write_text('{"fake": "sk-bench"}')
    base = {k: v for k, v in os.environ.items() if not k.startswith("SEELEN_")}
    return {**base, "LLM_USER_PATH": str(home)}


def compare(
    seelen_cmd: list[str],
    env: dict[str, str],
    llm_env: dict[str, str],
    llm: str,
    runs: int,
    owner: Callable[[], int | None] | None = None,
) -> dict[str, list[float]]:
    """`runs` pairs of `llm -m fake hello` and `seelen_cmd` (after one warm-up each), in
    alternation: each one's CPU, wall and peak RSS, the owner's CPU for each answer (its pid
    from `owner`, default: asked of this Seelen), and per pair the ratios of CPU and wall
    against llm's, and of the client's and the owner's CPU together."""
    find_owner = owner or (lambda: owner_pid(env))
    llm_cmd = [llm, "-m", "fake", "hello"]
    run(llm_cmd, llm_env)  # warm both once
    run(seelen_cmd, env)
    llm_runs, seelen_runs, owner_runs = [], [], []
    for _ in range(runs):
        llm_runs.append(run(llm_cmd, llm_env))
        pid = find_owner()
        before = owner_cpu(pid)
        seelen_runs.append(run(seelen_cmd, env))
        owner_runs.append(owner_cpu(pid) - before)
    out = {
        f"{who} {name}": [r[i] for r in rs]
        for who, rs in (("llm", llm_runs), ("seelen", seelen_runs))
        for i, name in enumerate(("cpu", "wall", "rss"))
    }
    out["owner cpu"] = owner_runs
    pairs = list(zip(seelen_runs, owner_runs, llm_runs, strict=True))
    out["ratio cpu"] = [s[0] / max(b[0], 1e-9) for s, _, b in pairs]
    out["ratio wall"] = [s[1] / max(b[1], 1e-9) for s, _, b in pairs]
    out["ratio cpu with owner"] = [(s[0] + o) / max(b[0], 1e-9) for s, o, b in pairs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--llm", default="/tmp/llmvenv/bin/llm")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    with (
        ModelServer(responder=lambda body: Reply(text="ok")) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        llm_env = llm_environment(Path(tmp) / "llm", server.url)
        base = {k: v for k, v in os.environ.items() if not k.startswith("SEELEN_")}
        env = {
            **base,
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "sk-bench",
            "CHAT_MODEL": "test-model",
            "SEELEN_DATA_DIR": str(Path(tmp) / "seelen"),
            "ENABLE_MCP": "false",
            "SEELEN_OWNER": "true",
        }
        seelen_cmd = [str(Path(sys.executable).parent / "seelen"), "ask", "hello"]
        seed(env, args.turns)
        print(f"memory: {args.turns} archived turns, indexed")

        cold = run(seelen_cmd, env)
        print(
            f"first ask, no owner running (starts it): cpu {cold[0]:.3f} s, "
            f"wall {cold[1]:.3f} s, peak RSS {cold[2]:.0f} MiB"
        )
        inproc = [run(seelen_cmd, {**env, "SEELEN_OWNER": "false"}) for _ in range(3)]
        print(line("in-process ask (SEELEN_OWNER=false) cpu", [r[0] for r in inproc], "s"))
        print(line("in-process ask wall", [r[1] for r in inproc], "s"))
        print(line("in-process ask peak RSS", [r[2] for r in inproc], "MiB"))

        got = compare(seelen_cmd, env, llm_env, args.llm, args.runs)
        for name in ("cpu", "wall", "rss"):
            unit = "MiB" if name == "rss" else "s"
            label = "peak RSS" if name == "rss" else name
            print(line(f"llm -m fake {label}", got[f"llm {name}"], unit))
            print(line(f"seelen ask {label}", got[f"seelen {name}"], unit))
        print(line("owner cpu per answer", got["owner cpu"], "s"))
        print(line("ratio cpu seelen/llm (goal <= 0.5)", got["ratio cpu"], "x"))
        print(line("ratio wall seelen/llm (goal <= 0.5)", got["ratio wall"], "x"))
        print(line("ratio cpu (client + owner)/llm", got["ratio cpu with owner"], "x"))
        subprocess.run(
            [str(Path(sys.executable).parent / "seelen"), "server", "stop"],
            env=env,
            capture_output=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
