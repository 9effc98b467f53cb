"""`seelen ask` with the bundled model and the chat closed: time to the first word, prompt
tokens, and the tokens llama.cpp took from its cache, question after question.

Usage: python bench/bench_local_ask.py [--person 0] [--questions 3] [--context TOKENS]
                                       [--pause SECONDS]

One MemoryBank person's ten days (real conversations, `../shared/data/memorybank`) are
imported as archived sessions, so every question recalls passages. Then, with no endpoint
configured (the bundled SmolLM2 through the warm background owner, DEBUG_MODE on):
`seelen ask --ephemeral hello` starts the owner, and the person's probing questions follow,
each a real `seelen ask` in a pipe. Per question: seconds to the first word on stdout and to
the end; from llama.cpp's log (`logs/llama.log`), the tokens it evaluated for the answer and
for any warm-up since the previous question; from the stored reply, the prompt's tokens
(cached = prompt - evaluated). `--pause` waits between questions, as a user would (a warm-up
runs meanwhile). The load average is printed before and after: on 2 shared cores it decides
the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_memorybank import FILES, export_for, find_data  # noqa: E402

# "… slot print_timing: id  0 | task 7 | prompt eval time = 104.91 ms / 17 tokens (…)"
_PROMPT_EVAL = re.compile(r"task (\d+) \| prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL = re.compile(r"task (\d+) \|\s+eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


@dataclass
class Task:
    """One request llama.cpp served: tokens it evaluated, and tokens it generated."""

    evaluated: int
    eval_ms: float
    generated: int = 0


@dataclass
class Asked:
    question: str
    first_word: float
    seconds: float
    answer: Task | None
    warmups: list[Task]
    prompt_tokens: int


def llama_tasks(log: Path, offset: int) -> tuple[list[Task], int]:
    """The requests llama.cpp logged after byte `offset`, and the new offset."""
    if not log.exists():
        return [], offset
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
        end = f.tell()
    tasks: dict[str, Task] = {}
    for line in text.splitlines():
        if match := _PROMPT_EVAL.search(line):
            tasks[match[1]] = Task(int(match[3]), float(match[2]))
        elif (match := _EVAL.search(line)) and match[1] in tasks:
            tasks[match[1]].generated = int(match[3])
    return list(tasks.values()), end


def last_prompt_tokens(db: Path) -> int:
    """The prompt tokens of the newest stored reply (its usage)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT meta FROM conversation WHERE role = 'assistant' ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
    return int(json.loads(row[0] or "{}").get("usage", {}).get("prompt_tokens", 0)) if row else 0


def ask(seelen: str, env: dict[str, str], question: str, *extra: str) -> tuple[float, float]:
    """Run `seelen ask`; (seconds to its first byte on stdout, seconds to its end)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [seelen, "ask", *extra, question], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    first = proc.stdout.read(1)
    first_word = time.perf_counter() - started
    rest = proc.stdout.read()
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0 or not (first + rest).strip():
        raise SystemExit(f"seelen ask failed ({proc.returncode}): {err.decode()[-500:]}")
    return first_word, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the MemoryBank folder")
    parser.add_argument("--person", type=int, default=0)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--context", type=int, help="CONTEXT_TOKENS (default: Seelen's)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between questions")
    args = parser.parse_args()
    data = find_data(args.data)
    people = json.loads((data / FILES["en"]).read_text("utf-8"))
    name = list(people)[args.person]
    history = people[name]["history"]
    history = history if isinstance(history, dict) else json.loads(history)
    questions = next(
        json.loads(line)[name]
        for line in (data / "probing_questions_en.jsonl").read_text("utf-8").splitlines()
        if line.strip() and name in json.loads(line)
    )[: args.questions]
    seelen = str(Path(sys.executable).parent / "seelen")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="seelen-local-ask-") as tmp:
        drop = ("OPENAI_", "LLM_", "CHAT_", "TOOL_", "SEELEN_", "CONTEXT_", "RECALL_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env.update(SEELEN_DATA_DIR=tmp, DEBUG_MODE="true", ENABLE_MCP="false", SEELEN_OWNER="true")
        if args.context:
            env["CONTEXT_TOKENS"] = str(args.context)
        export = Path(tmp) / "export.json"
        export.write_text(export_for("en", args.person, history), "utf-8")
        subprocess.run([seelen, "import", str(export)], env=env, check=True, capture_output=True)
        print(f"memory: {name}'s {len(history)} days, imported and indexed")
        profile = Path(tmp) / "default"
        log, offset = profile / "logs" / "llama.log", 0
        try:
            first, total = ask(seelen, env, "hello", "--ephemeral")
            tasks, offset = llama_tasks(log, offset)
            print(
                f"owner start (ask --ephemeral hello): first word {first:.1f} s, end {total:.1f} s;"
                f" evaluated {[t.evaluated for t in tasks]}"
            )
            for question in questions:
                time.sleep(args.pause)
                _, offset = llama_tasks(log, offset) if args.pause else ([], offset)
                first, total = ask(seelen, env, question)
                tasks, offset = llama_tasks(log, offset)
                answer = max(tasks, key=lambda t: t.generated, default=None)
                warm = [t for t in tasks if t is not answer]
                asked = Asked(
                    question,
                    first,
                    total,
                    answer,
                    warm,
                    last_prompt_tokens(profile / "chat_sessions.db"),
                )
                report(asked)
        finally:
            subprocess.run([seelen, "server", "stop"], env=env, capture_output=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def report(asked: Asked) -> None:
    answer = asked.answer or Task(0, 0.0)
    cached = asked.prompt_tokens - answer.evaluated
    warm = sum(t.evaluated for t in asked.warmups)
    print(
        f"  first word {asked.first_word:5.1f} s, end {asked.seconds:5.1f} s | prompt "
        f"{asked.prompt_tokens:5d} tok, evaluated {answer.evaluated:5d} "
        f"({answer.eval_ms / 1000:4.1f} s), cached {cached:5d}"
        f"{f' | warm-up evaluated {warm} tok during the ask' if warm else ''}"
        f" | {asked.question[:50]}"
    )


if __name__ == "__main__":
    main()
