"""Time until `seelen chat` shows its prompt in a terminal, and until its first answer.

    .venv/bin/python bench/bench_prompt.py [--runs 5]

Runs the real command in a pseudo-terminal against a local OpenAI-protocol server that
answers at once, with a profile holding a few archived sessions (so recall loads LanceDB and
the embedding model). Measures from process start to the prompt ("›") appearing, and from
sending the first message (typed right away) to its answer. Goal: prompt within 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from model_server import ModelServer, Reply  # noqa: E402

# prompt-toolkit asks the terminal where the cursor is (CPR) and, without an answer, waits
# up to 2 s before it prints above the prompt; a real terminal answers at once, so this one
# does too.
CPR_REQUEST, CPR_ANSWER = b"\x1b[6n", b"\x1b[1;1R"


def read_until(fd: int, marker: bytes, seconds: float) -> float | None:
    """Seconds until `marker` shows up on `fd`, or None; answers cursor-position requests."""
    start, seen = time.perf_counter(), b""
    while time.perf_counter() - start < seconds:
        ready, _, _ = select.select([fd], [], [], 0.01)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return None
            for _ in range(chunk.count(CPR_REQUEST)):
                os.write(fd, CPR_ANSWER)
            seen += chunk
            if marker in seen:
                return time.perf_counter() - start
    return None


def one_run(env: dict[str, str]) -> tuple[float, float]:
    main, child = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "seelen"), "chat"],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    try:
        shown = read_until(main, "›".encode(), 30)
        prompt = time.perf_counter() - started if shown is not None else float("nan")
        os.write(main, b"hello there\r")
        answered = read_until(main, b"ANSWER", 30)
        os.write(main, b"/exit\r")
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return prompt, answered if answered is not None else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    with (
        ModelServer(lambda body: Reply(text="ANSWER")) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "sk-bench",
            "CHAT_MODEL": "test-model",
            "SEELEN_DATA_DIR": tmp,
            "ENABLE_MCP": "false",
            "TERM": "xterm",
        }
        for i in range(3):  # a memory to recall from
            subprocess.run(
                [sys.executable, "-m", "seelen", "chat"],
                env=env,
                check=True,
                input=f"my hobby {i} is sailing\n/save\n".encode(),
                capture_output=True,
            )
        runs = []
        for i in range(args.runs):
            runs.append(one_run(env))
            print(f"run {i + 1}: prompt {runs[-1][0]:.3f} s, first answer {runs[-1][1]:.3f} s")
    prompts = [r[0] for r in runs]
    answers = [r[1] for r in runs]
    print(
        f"prompt shown      median {statistics.median(prompts):.3f} s  "
        f"min {min(prompts):.3f}  max {max(prompts):.3f}"
    )
    print(
        f"first answer      median {statistics.median(answers):.3f} s  "
        f"min {min(answers):.3f}  max {max(answers):.3f}  (from sending it)"
    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
