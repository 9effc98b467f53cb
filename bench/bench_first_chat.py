"""A newcomer's first chat with the bundled model: ten scripted turns, then archive.

    .venv/bin/python bench/bench_first_chat.py [--variant shipped|plain] [--runs 1]

Runs the real Seelen (local provider, bundled SmolLM2 through llama.cpp) with a fresh data
dir: the user tells five facts and asks them back, then the session is archived. Reports,
per run: the longest reply in tokens (goal ≤ 300), replies that loop (a word 4-gram seen
more than 3 times; goal 0), seconds to the first token (median and worst), facts answered
(of 5), archive seconds (goal ≤ 60), and whether the summary or profile loops.

`--variant plain` sends no sampling options (the endpoint's defaults, as before), so the
effect of the local provider's sampling can be measured on the same script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seelen.agent import Done, Failed, TextDelta, TurnUsage
from seelen.app import build_app
from seelen.config import load_settings

SCRIPT: list[tuple[str, str | None]] = [
    ("Hi! My name is Mara and I live in Lisbon.", None),
    ("I work as a nurse at a children's hospital.", None),
    ("My cat is called Pixel and she is three years old.", None),
    ("What is my name?", "mara"),
    ("I'm learning to play the cello.", None),
    ("Which city do I live in?", "lisbon"),
    ("What instrument am I learning?", "cello"),
    ("What is my cat's name?", "pixel"),
    ("What is my job?", "nurse"),
    ("Thanks! Tell me in two sentences what you know about me.", None),
]


def loops(text: str) -> bool:
    """True when some word 4-gram occurs more than three times."""
    words = re.findall(r"\w+", text.lower())
    grams = Counter(tuple(words[i : i + 4]) for i in range(len(words) - 3))
    return bool(grams) and max(grams.values()) > 3


async def one_run(variant: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"SEELEN_DATA_DIR": tmp, "ENABLE_MCP": "false", "LLM_PROVIDER": "local"}
        settings = load_settings(env, environ={k: v for k, v in os.environ.items()
                                               if not k.startswith(("OPENAI_", "SEELEN_"))})
        app = build_app(settings)
        if variant == "plain":
            app.model.options = {}
            app.sessions.tool_model.options = {}
        try:
            await app.open_session()
            longest, looping, firsts, facts = 0, 0, [], 0
            for text, expected in SCRIPT:
                started, first, reply = time.perf_counter(), None, ""
                async for event in app.bot.turn(text):
                    if isinstance(event, TextDelta) and first is None:
                        first = time.perf_counter() - started
                    elif isinstance(event, TurnUsage):
                        longest = max(longest, event.completion_tokens)
                    elif isinstance(event, Done):
                        reply = event.text
                    elif isinstance(event, Failed):
                        reply = f"(failed: {event.message})"
                firsts.append(first if first is not None else time.perf_counter() - started)
                looping += loops(reply)
                facts += bool(expected and expected in reply.lower())
                print(f"  > {text}\n    {' '.join(reply.split())[:160]}")
            started = time.perf_counter()
            result = await app.sessions.archive()
            archive = time.perf_counter() - started
            profile = app.files.read("user_profile.txt")
        finally:
            await app.aclose()
    return {
        "longest reply (tokens)": longest,
        "looping replies": looping,
        "first token median (s)": statistics.median(firsts),
        "first token worst (s)": max(firsts),
        "facts answered (of 5)": facts,
        "archive (s)": archive,
        "summary loops": float(loops(result.summary)),
        "profile loops": float(loops(profile)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--variant", choices=("shipped", "plain"), default="shipped")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    print(f"variant {args.variant}; load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    for run in range(args.runs):
        print(f"run {run + 1}:")
        for key, value in asyncio.run(one_run(args.variant)).items():
            print(f"  {key:<24} {value:8.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
