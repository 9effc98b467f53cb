"""A new user's first chat with the bundled SmolLM2 model: ten turns, then /save.

Usage: python bench/bench_first_chat.py [--sampling seelen|none] [--temperature T]
       [--repeat-penalty R] [--top-p P] [--max-tokens N] [--full-prompt] [--full-rules]
       [--context TOKENS] [--recall] [--runs 1]

The conversation tells the model five facts and asks them back (with --recall, in a new
session after /save: the answers can then come only from what recall brings into the
prompt, the facts' turns and the session's summary). Per run it prints each
reply's length in tokens, whether it loops (a word 4-gram repeated more than 3 times), the
seconds to the first token; then the facts answered and the archive (/save) time, and
whether the archive wrote a loop into the summary or the profile. Everything runs offline,
in a temporary data dir. CPU-heavy: run it a few times, on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seelen.app import build_app
from seelen.config import load_settings
from seelen.memory.persona import PROFILE
from seelen.protocol.events import Done, Failed, TextDelta, TurnUsage

FACTS = [
    ("Hi! My name is Lena.", None),
    ("I live in Porto and I work as a nurse.", None),
    ("My cat is called Pixel.", None),
    ("My favourite food is ramen.", None),
    ("Tomorrow I fly to Oslo for my sister's wedding.", None),
    ("What is my name?", "lena"),
    ("Which city do I live in?", "porto"),
    ("What is my cat called?", "pixel"),
    ("What is my favourite food?", "ramen"),
    ("Where am I flying tomorrow?", "oslo"),
]
LOOP_REPEATS = 3  # a 4-gram seen more than this many times makes a reply a loop


@dataclass
class Reply:
    """One turn's measurements."""

    question: str
    text: str = ""
    tokens: int = 0
    first_token: float = 0.0
    seconds: float = 0.0
    failed: str = ""
    expected: str | None = None

    @property
    def loops(self) -> bool:
        return loops(self.text)

    @property
    def answered(self) -> bool:
        return self.expected is not None and self.expected in self.text.lower()


@dataclass
class Run:
    replies: list[Reply] = field(default_factory=list)
    archive_seconds: float = 0.0
    summary: str = ""
    profile: str = ""


def loops(text: str) -> bool:
    """Whether a word 4-gram repeats more than LOOP_REPEATS times."""
    words = re.findall(r"\w+", text.lower())
    grams = Counter(tuple(words[i : i + 4]) for i in range(len(words) - 3))
    return bool(grams) and max(grams.values()) > LOOP_REPEATS


async def one_turn(app, question: str, expected: str | None) -> Reply:
    reply = Reply(question, expected=expected)
    started = time.perf_counter()
    async for event in app.bot.turn(question):
        if isinstance(event, TextDelta) and not reply.first_token:
            reply.first_token = time.perf_counter() - started
        elif isinstance(event, Done):
            reply.text = event.text
        elif isinstance(event, TurnUsage):
            reply.tokens = event.completion_tokens
        elif isinstance(event, Failed):
            reply.failed = event.message
    reply.seconds = time.perf_counter() - started
    return reply


async def run_once(args: argparse.Namespace) -> Run:
    if args.context:
        os.environ["CONTEXT_TOKENS"] = str(args.context)  # the recall budget follows it
    app = build_app(load_settings())
    if args.sampling == "none":
        app.model.sampling = {}
        app.model.max_tokens = 0
    for key, value in (
        ("temperature", args.temperature),
        ("repeat_penalty", args.repeat_penalty),
        ("top_p", args.top_p),
    ):
        if value is not None:
            app.model.sampling[key] = value
    if args.max_tokens is not None:
        app.model.max_tokens = args.max_tokens
    if args.full_prompt:
        app.bot.context_tokens = 8000  # the full rules, as an endpoint gets them
    if args.full_rules:
        import seelen.memory.context as context

        context.COMPACT_BUDGET = 0  # the full rules within the local prompt budget
    print(f"  prompt budget: {app.bot.context_tokens} tokens")
    print(f"  sampling: {app.model.sampling}, reply cap: {app.model.max_tokens or 'none'}")
    run = Run()
    try:
        await app.start()  # the indexer too, so /save's turns are found by meaning as well
        if hasattr(app.bot, "keep_prompt_warm"):  # as the chat does (this code, not older)
            app.bot.keep_prompt_warm()
        for number, (question, expected) in enumerate(FACTS):
            if args.recall and number == len(FACTS) // 2:
                started = time.perf_counter()
                await app.sessions.archive()  # the questions come in a new session
                print(f"  /save: {time.perf_counter() - started:.1f} s")
            reply = await one_turn(app, question, expected)
            run.replies.append(reply)
            mark = "LOOP " if reply.loops else ""
            print(
                f"  {reply.tokens:4d} tok {reply.first_token:5.1f}s first {reply.seconds:5.1f}s"
                f" {mark}| {question} → {reply.text[:70]!r}",
                flush=True,
            )
        started = time.perf_counter()
        result = await app.sessions.archive()
        run.archive_seconds = time.perf_counter() - started
        run.summary = result.summary
        run.profile = app.files.read(PROFILE)
    finally:
        await app.aclose()
    return run


def report(run: Run) -> None:
    replies = run.replies
    first = sorted(r.first_token for r in replies if r.first_token)
    print(
        f"  longest reply: {max(r.tokens for r in replies)} tokens"
        f" | looping replies: {sum(r.loops for r in replies)}/10"
        f" | first token: median {first[len(first) // 2]:.1f} s, max {first[-1]:.1f} s"
        f" | facts answered: {sum(r.answered for r in replies)}/5"
        f" | archive: {run.archive_seconds:.1f} s"
        f" | summary {len(run.summary)} chars{' LOOPS' if loops(run.summary) else ''}"
        f" | profile {len(run.profile)} chars{' LOOPS' if loops(run.profile) else ''}"
    )
    print(f"  summary: {run.summary[:200]!r}")
    print(f"  profile: {run.profile[:200]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampling", choices=["seelen", "none"], default="seelen")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--repeat-penalty", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--full-prompt", action="store_true", help="8,000-token budget, full rules")
    parser.add_argument("--full-rules", action="store_true", help="full rules, local budget")
    parser.add_argument("--context", type=int, help="CONTEXT_TOKENS (default: Seelen's)")
    parser.add_argument("--recall", action="store_true", help="ask in a new session")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for key in [k for k in os.environ if k.startswith(("OPENAI_", "LLM_", "CHAT_", "TOOL_"))]:
        del os.environ[key]  # the bundled model, as a new user without an endpoint has it
    os.environ["ENABLE_MCP"] = "false"
    with tempfile.TemporaryDirectory(prefix="seelen-first-chat-") as folder:
        os.environ["SEELEN_DATA_DIR"] = folder
        for number in range(args.runs):
            os.environ["SEELEN_PROFILE"] = f"run{number}"
            print(f"run {number + 1}:")
            report(asyncio.run(run_once(args)))
    print(f"(load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
