"""The background owner's memory over its quiet life, and what the next question then costs.

    .venv/bin/python bench/bench_owner.py [--data-dir DIR] [--turns 20014] [--wait 150]

A profile of `--turns` turns (bench_import.py's ChatGPT export of MemoryBank exchanges,
imported with `seelen import --wait`; or an existing `--data-dir`) gets one `seelen ask`
through a fresh owner, on tests/model_server.py's OpenAI-protocol server. Then the owner's
RSS is read from /proc as it stays quiet (the owner that serves may change: a quiet owner
hands over to a resting one), and a second ask is timed: its wall time, and the owner's CPU
for it. `server status` is asked along the way: it keeps no owner awake.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from model_server import ModelServer, Reply  # noqa: E402

from seelen.client.connect import owner_status  # noqa: E402
from seelen.client.procs import cpu_seconds  # noqa: E402
from seelen.config import load_settings  # noqa: E402

SEELEN = str(Path(sys.executable).with_name("seelen"))
QUESTION = "what did I say about my sister's wedding plans"


def rss_mib(pid: int) -> int:
    """Resident memory of process `pid` (0 when it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0
    return next((int(x.split()[1]) // 1024 for x in lines if x.startswith("VmRSS:")), 0)


def build(data_dir: Path, turns: int, env: dict[str, str]) -> None:
    """A profile of `turns` imported turns, every text embedded."""
    import bench_import

    pairs = bench_import.exchanges(Path("/work/shared/data/memorybank"), False)
    export = data_dir.parent / "export.json"
    export.write_text(json.dumps(bench_import.chatgpt_export(turns, pairs)))
    started = time.perf_counter()
    done = subprocess.run([SEELEN, "import", "--wait", str(export)], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    print(f"imported {turns:,} turns in {time.perf_counter() - started:.0f} s")
    subprocess.run([SEELEN, "server", "stop"], env=env, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--turns", type=int, default=20014)
    parser.add_argument("--wait", type=float, default=150.0, help="quiet seconds observed")
    args = parser.parse_args()
    with ModelServer(responder=lambda body: Reply(text="fine")) as server:
        data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="seelen-owner-")) / "data"
        env = {
            **os.environ,
            "SEELEN_DATA_DIR": str(data_dir),
            "SEELEN_OWNER": "true",
            "ENABLE_MCP": "false",
            "EMBEDDING_PROVIDER": "local",
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "k",
            "CHAT_MODEL": "m",
        }
        os.environ.update(env)
        if args.data_dir is None:
            build(data_dir, args.turns, env)
        settings = load_settings()
        print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
        subprocess.run([SEELEN, "ask", QUESTION], env=env, check=True, capture_output=True)
        started = time.monotonic()
        while (quiet := time.monotonic() - started) < args.wait:
            status = owner_status(settings)
            if status is not None:
                state = "resting" if status.resting else "warm"
                print(f"quiet {quiet:5.0f} s: pid {status.pid} ({state}) {rss_mib(status.pid)} MiB")
            time.sleep(10)
        status = owner_status(settings)
        assert status is not None
        cpu_before, clock = cpu_seconds(status.pid), time.perf_counter()
        subprocess.run([SEELEN, "ask", QUESTION], env=env, check=True, capture_output=True)
        wall = time.perf_counter() - clock
        print(
            f"next ask after {args.wait:.0f} quiet s: wall {wall:.2f} s, owner CPU "
            f"{cpu_seconds(status.pid) - cpu_before:.2f} s, owner then {rss_mib(status.pid)} MiB"
        )
        subprocess.run([SEELEN, "server", "stop"], env=env, capture_output=True)
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
