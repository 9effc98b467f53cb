"""Recall on real conversations: MemoryBank (MIT), labelled by hand in memorybank_labels.json.

Usage: python bench/bench_memorybank.py [--data DIR] [--lang en,cn] [--cli] [--limit 10]
                                        [--embedder auto|local|multilingual]
                                        [--asked-on today]

Each person's ten days become one profile: each date a session (archived, no summary: the
dataset has none), each exchange a user and an assistant turn, dated that day. The profile is
built by importing an export-format JSON (the same code as `seelen import`); the questions are
asked through the same ranking as `seelen memory search --json` (with --cli, through the real
commands: `seelen import FILE` and `seelen memory search --batch --json`). For each question:
R@k is the share of its labelled turns among the first k turns, MRR the reciprocal rank of the
first one. Reported per language and per mode (bm25, vector, hybrid, at --limit turns); then
R@prompt: the share of labelled turns among those chat would put in its prompt (`in_prompt`:
recalled turns and their context, within its token budget), with the tokens they cost
(`prompt_tokens`, mean per question). --tokens sets RECALL_TOKENS (several, comma-separated,
each its own run); --context sets recall's passage rule, for measuring it.

Two sets of questions, reported apart: MemoryBank's own probing questions (labels in
memorybank_labels.json) and questions answered only by exchanges of two or more days
(memorybank_days.json, written for this bench). They are asked as of the day after the
person's last day, as the probing questions were: "On May 3rd" means the May 3rd of the
ten days (`--asked-on today` asks at today's date, as before; `--cli` always does, the
commands having no clock to set).

The data stays outside the repository (../shared/data/memorybank, or --data); only the labels
are committed. Turn ids are stable, `mb-<lang>-<person>-<date>-<exchange>-<u|a>`, so labels
name turns as [date, exchange index, role] and need no ids.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seelen.api import Memory
from seelen.app import recall_tokens
from seelen.memory.recall import Recall

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import BenchClock, add_variant_flags, leave_out, tune

HERE = Path(__file__).resolve().parent
LABELS = {
    "": HERE / "memorybank_labels.json",  # MemoryBank's probing questions
    ", several days": HERE / "memorybank_days.json",
}
MODES = ("bm25", "vector", "hybrid")
FILES = {"en": "memory_bank_en.json", "cn": "memory_bank_cn.json"}


def find_data(given: str | None) -> Path:
    """The MemoryBank folder: --data, $MEMORYBANK_DIR, or ../shared/data/memorybank upward."""
    candidates = [given, os.environ.get("MEMORYBANK_DIR")]
    candidates += [str(p / "shared/data/memorybank") for p in HERE.parents]
    for candidate in candidates:
        if candidate and (Path(candidate) / FILES["en"]).is_file():
            return Path(candidate)
    raise SystemExit("MemoryBank data not found: give --data DIR")


def slug(lang: str, person: int) -> str:
    return f"mb-{lang}-{person:02d}"


def text_id(lang: str, person: int, date: str, exchange: int, role: str) -> str:
    """The stable id of one turn (labels are resolved to these)."""
    return f"{slug(lang, person)}-{date}-{exchange}-{role[0]}"


def export_turn(text_id: str, moment: datetime, role: str, text: str) -> dict[str, str]:
    """One turn as `seelen export --format json` writes it."""
    return {
        "text_id": text_id,
        "time": moment.isoformat(timespec="milliseconds"),
        "role": role,
        "text": text,
    }


def archived_session(
    session_id: str, start: datetime, end: datetime, turns: list[dict[str, str]]
) -> dict[str, Any]:
    """One archived session without a summary, as the export writes it."""
    return {
        "session_id": session_id,
        "status": "archived",
        "start": start.isoformat(timespec="milliseconds"),
        "end": end.isoformat(timespec="milliseconds"),
        "summary": None,
        "rolling_summary": None,
        "turns": turns,
    }


def export_for(lang: str, person: int, history: dict[str, list[dict[str, str]]]) -> str:
    """One person's days as a `seelen export --format json` document."""
    sessions = []
    for date in sorted(history):
        # Exchanges a minute apart from 10:00 UTC; the reply 30 s after its question.
        day = datetime.fromisoformat(date).replace(hour=10, tzinfo=UTC)
        turns = []
        for i, pair in enumerate(history[date]):
            for role, key, offset in (("user", "query", 0), ("assistant", "response", 30)):
                moment = day + timedelta(minutes=i, seconds=offset)
                tid = text_id(lang, person, date, i, role)
                turns.append(export_turn(tid, moment, role, str(pair.get(key) or "")))
        end = day + timedelta(minutes=len(history[date]), seconds=30)
        sessions.append(archived_session(f"{slug(lang, person)}-{date}", day, end, turns))
    return json.dumps({"format": "seelen-export", "version": 2, "sessions": sessions})


def score(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    """R@5, R@10 (share of gold turns found) and reciprocal rank of the first gold turn."""
    first = next((r for r, i in enumerate(ranked, start=1) if i in gold), None)
    return {
        "R@5": len(gold & set(ranked[:5])) / len(gold),
        "R@10": len(gold & set(ranked[:10])) / len(gold),
        "MRR": 1 / first if first else 0.0,
    }


def prompt_score(shown: Sequence[str], tokens: int, gold: set[str]) -> dict[str, float]:
    """The share of gold turns in the prompt, and what the prompt's recalled turns cost."""
    return {"R@prompt": len(gold & set(shown)) / len(gold), "tokens": tokens, "turns": len(shown)}


def ranked(turns: list[dict]) -> list[str]:
    """The ids of ranked turns, best first: the listing also holds the prompt's context turns
    (no rank), which are no part of the ranking."""
    return [t["text_id"] for t in sorted((t for t in turns if t["rank"]), key=lambda t: t["rank"])]


def asked_on(history: dict[str, list[dict[str, str]]]) -> int:
    """When the questions are asked: noon (UTC) of the day after the person's last day."""
    last = datetime.fromisoformat(max(history)).replace(hour=12, tzinfo=UTC)
    return int((last + timedelta(days=1)).timestamp() * 1000)


@dataclass(frozen=True)
class Person:
    """One person's profile to build and the questions to ask of it."""

    root: Path  # the data folder
    name: str  # the profile
    export: str  # the person's days, as `seelen export --format json` writes them
    questions: list[str]
    now_ms: int | None  # when they are asked (None: now)


def run_api(person: Person, options: argparse.Namespace) -> dict:
    """Import and search in-process through seelen.api, per variant (--without): {variant:
    {mode: [ranked ids per question], "prompt@…": [(ids in the prompt, tokens) per
    question]}}."""
    settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": options.embedder}
    with Memory.open(person.root, person.name, **settings) as memory:
        memory.import_json(person.export)
        recall = memory._app.recall
        assert recall is not None
        if person.now_ms is not None:
            recall.clock = BenchClock(person.now_ms)
        tune(recall, options)
        out: dict = {}
        for without in options.without.split("/"):
            leave_out(recall, without)
            out[without] = search_all(memory, recall, person.questions, options)
        return out


def search_all(
    memory: Memory, recall: Recall, questions: list[str], options: argparse.Namespace
) -> dict:
    """Every question in every mode, then through chat's recall per budget: {mode: [ranked
    ids per question], "prompt@…": [(ids in the prompt, tokens) per question]}."""
    out: dict = {}
    for mode in MODES:
        found = [memory.recall(q, options.limit, mode)["turns"] for q in questions]
        out[mode] = [ranked(turns) for turns in found]
    for variant in variants(options):
        recall.context, given = variant
        budget, _, cap = given.partition(":")  # "960:20": 960 tokens, at most 20 turns
        recall.token_budget = int(budget) or recall_tokens(memory._app.settings)
        recall.conv_num = int(cap or options.cap or memory._app.settings.recall_conv_num)
        chat = [memory.recall(q) for q in questions]
        out[f"prompt@{variant}"] = [
            ([t["text_id"] for t in c["turns"] if t["in_prompt"]], c["prompt_tokens"]) for c in chat
        ]
    return out


def run_cli(person: Person, options: argparse.Namespace) -> dict:
    """The same through the installed commands, one process per import and per mode (asked
    now: `now_ms` cannot reach them)."""
    root, name, questions = person.root, person.name, person.questions
    env = {**os.environ, "SEELEN_DATA_DIR": str(root), "SEELEN_PROFILE": name, "TIMEZONE": "UTC"}
    env["EMBEDDING_PROVIDER"] = options.embedder
    limit = options.limit
    command = [sys.executable, "-m", "seelen"]
    path = root / f"{name}.json"
    path.write_text(person.export, "utf-8")
    subprocess.run([*command, "import", str(path)], env=env, check=True, capture_output=True)
    out = {}
    lines = "".join(q.replace("\n", " ") + "\n" for q in questions)
    for mode in MODES:
        args = ["memory", "search", "--json", "--batch", "--limit", str(limit), "--mode", mode]
        done = subprocess.run(
            [*command, *args], env=env, input=lines, text=True, capture_output=True, check=True
        )
        found = [json.loads(line)["turns"] for line in done.stdout.splitlines()]
        out[mode] = [ranked(turns) for turns in found]
    for variant in variants(options):
        budget, _, cap = variant[1].partition(":")
        args = ["memory", "search", "--json", "--batch"]
        limits = {"RECALL_TOKENS": budget, **({"RECALL_CONV_NUM": cap} if cap else {})}
        done = subprocess.run(
            [*command, *args],
            env={**env, **limits},
            input=lines,
            text=True,
            capture_output=True,
            check=True,
        )
        chat = [json.loads(line) for line in done.stdout.splitlines()]
        out[f"prompt@{variant}"] = [
            ([t["text_id"] for t in c["turns"] if t["in_prompt"]], c["prompt_tokens"]) for c in chat
        ]
    return {"": out}  # the commands rank as shipped: no change can be left out


def variants(options: argparse.Namespace) -> list[tuple[str, str]]:
    """Every (passage rule, budget) asked for, in that nesting."""
    rules = options.context.split(",")
    return [(context, budget) for context in rules for budget in options.budgets]


def bench_language(
    data: Path, lang: str, labels: dict[str, dict], options: argparse.Namespace
) -> dict[str, dict[str, dict]]:
    """Scores of every labelled question of one language, per variant (--without), set of
    questions, mode and budget: {variant: {set: {"scores": {mode: [row per question]},
    "unlabelled": n}}}."""
    people = json.loads((data / FILES[lang]).read_text("utf-8"))
    out: dict[str, dict[str, dict]] = {}
    unlabelled = dict.fromkeys(labels, 0)
    with tempfile.TemporaryDirectory() as tmp:
        for p, (name, person) in enumerate(people.items()):
            items = []
            for kind, sets in labels.items():
                given = sets[lang].get(name.strip(), [])
                items += [(kind, x) for x in given if x["turns"]]
                unlabelled[kind] += sum(1 for x in given if not x["turns"])
            if not items:
                continue
            export = export_for(lang, p, person["history"])
            questions = [x["question"] for _, x in items]
            run = run_cli if options.cli else run_api
            now = None if options.asked_on == "today" else asked_on(person["history"])
            asked = Person(Path(tmp), slug(lang, p), export, questions, now)
            for variant, ranked in run(asked, options).items():
                sets = out.setdefault(variant, {kind: {"scores": {}} for kind in labels})
                for mode in ranked:
                    for (kind, x), got in zip(items, ranked[mode], strict=True):
                        gold = {text_id(lang, p, d, i, r) for d, i, r in x["turns"]}
                        prompt = mode.startswith("prompt")
                        row = prompt_score(*got, gold) if prompt else score(got, gold)
                        sets[kind]["scores"].setdefault(mode, []).append(row)
    for sets in out.values():
        for kind, result in sets.items():
            result["unlabelled"] = unlabelled[kind]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the MemoryBank folder")
    parser.add_argument("--lang", default="en,cn")
    parser.add_argument("--cli", action="store_true", help="go through the seelen commands")
    parser.add_argument("--limit", type=int, default=10, help="turns listed per question")
    parser.add_argument(
        "--tokens",
        default="0",
        help="RECALL_TOKENS for R@prompt, comma-separated (0: default); BUDGET:CAP caps turns too",
    )
    parser.add_argument("--cap", type=int, default=0, help="RECALL_CONV_NUM (0: default)")
    add_variant_flags(parser)
    parser.add_argument(
        "--embedder",
        default="auto",
        choices=("auto", "local", "multilingual"),
        help="EMBEDDING_PROVIDER (auto: as a user gets it)",
    )
    parser.add_argument(
        "--asked-on",
        default="after",
        choices=("after", "today"),
        help="the questions' date: the day after the person's last day, or today",
    )
    args = parser.parse_args()
    args.budgets = args.tokens.split(",")
    data = find_data(args.data)
    labels = {kind: json.loads(path.read_text("utf-8")) for kind, path in LABELS.items()}
    started = time.perf_counter()
    print(f"embedder: {args.embedder}, BM25 votes x{args.bm25_weight}, asked {args.asked_on}")
    if args.cli and args.without:
        raise SystemExit("--without needs the in-process run (the commands rank as shipped)")
    for lang in args.lang.split(","):
        for variant, sets in bench_language(data, lang, labels, args).items():
            if not args.cli:
                print(f"== without: {variant or 'nothing'} ==")
            for kind, result in sets.items():
                print_language(f"{lang}{kind}", result, args)
    print(f"({time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f})")


def print_language(title: str, result: dict, args: argparse.Namespace) -> None:
    """One set of questions of one language: each mode's ranking, then R@prompt."""
    print(f"{title}")
    print(f"{'lang':<5}{'mode':<26}{'n':>5}{'R@5':>8}{'R@10':>8}{'MRR':>8}")
    lang = title[:2]
    for mode in MODES:
        print_means(lang, mode, result["scores"][mode], ("R@5", "R@10", "MRR"))
    head = f"{'lang':<5}{'budget (context)':<26}{'n':>5}"
    print(f"{head}{'R@prompt':>8}{'tokens':>8}{'turns':>8}")
    for variant in variants(args):
        rows = result["scores"][f"prompt@{variant}"]
        name = f"{variant[1] if variant[1] != '0' else 'default'} ({variant[0]})"
        print_means(lang, name, rows, ("R@prompt", "tokens", "turns"))
    if result["unlabelled"]:
        print(f"{title}: {result['unlabelled']} questions have no supporting turn (skipped)")


def print_means(lang: str, row: str, scores: list[dict[str, float]], keys: Sequence[str]) -> None:
    """One line of means over the questions."""
    means = [sum(r[k] for r in scores) / max(len(scores), 1) for k in keys]
    cells = "".join(f"{m:>8.3f}" if m < 10 else f"{m:>8.0f}" for m in means)
    print(f"{lang:<5}{row:<26}{len(scores):>5}{cells}")


if __name__ == "__main__":
    main()
