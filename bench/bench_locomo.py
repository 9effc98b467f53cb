"""Recall on long, real conversations: LoCoMo (CC BY-NC 4.0), the seven-conversation dev split.

Usage: python bench/bench_locomo.py [--data FILE] [--cli [--seelen PATH]]
                                    [--asked-on after|today] [--limit 60]
                                    [--budget endpoint|bundled] [--dump FILE]
                                    [--only conv-30,conv-41] [--without ...]

What it measures is what was measured from outside: each conversation goes into a fresh data
dir through Seelen's own export format (one archived session per LoCoMo session, at its date;
each turn with a text id that encodes its `dia_id`; speaker_a is the user, speaker_b the
assistant; no summary: Seelen writes its own or none), then every question of categories 1-4
is asked through one `seelen memory search --batch --json --limit 60` (`--cli`: the installed
commands, `seelen import` then that search), or through the same ranking in-process
(`seelen.api.Memory`, the default: it builds each profile once and can leave ranking changes
out with --without, as bench_recall.py does). Both give the same numbers (checked: see the
docs' recall section). `--cli --seelen PATH` measures another install through the same
commands: an older commit's venv, for a before and after on one machine.

Per question: R@10 (share of its evidence turns among the first 10 turns ranked), reciprocal
rank of the first evidence turn, session R@5 (share of its evidence sessions among the first 5
distinct sessions of the ranking), missed@60 (share of its evidence not among the 60 turns
ranked), R@prompt (share among the turns marked `in_prompt`), with the recalled text's tokens
(characters of the `in_prompt` turns / 4) and their count. Means per category (1 multi-hop,
2 temporal, 3 open-domain, 4 single-hop) and over all.

Evidence ids are cleaned, not guessed: a string holding several ids ("D9:1 D4:4") is split;
"D:11:26" (a stray colon) reads as D11:26; an id naming no turn of the conversation (or with
no turn number, "D10:") is dropped, and a question left with no evidence is skipped (both
counted in the output).

A turn's text is "<speaker>: <text>": the questions name the speakers ("When did Gina get her
tattoo?"), and the measurement from outside evidently stored the names so (without them, on
main: R@10 .500, R@prompt .695; with them .615 / .779; the issue's .665 / .784). A shared
photo's machine caption is left out (`--images caption` adds "[image: <caption>]": R@prompt
.752, the turns longer).

When the questions are asked: `after` (the default) is noon UTC of the day after the
conversation's last session, as bench_memorybank.py asks, so "last year" and "in October"
mean what they meant to the speakers; `today` asks now. `--cli --asked-on after` runs the
commands under libfaketime (`apt-get install faketime`): the commands have no clock to set.

The data stays outside the repository (../shared/data/locomo-dev, or --data).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memorybank import archived_session, export_turn
from bench_recall import BenchClock, add_variant_flags, leave_out, tune

from seelen.api import Memory

HERE = Path(__file__).resolve().parent
FILE = "locomo-dev/locomo_dev7.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Settings of a user with an endpoint (the default prompt budget, 8,000 tokens: recall 1,500);
# no call reaches it: memory commands start no model. "bundled": the bundled model's budget.
BUDGETS = {
    "endpoint": {"OPENAI_API_KEY": "sk-bench-no-calls", "LLM_PROVIDER": "auto"},
    "bundled": {"LLM_PROVIDER": "local"},
}
TURN_SECONDS = 30  # turns of a session, this far apart from its start
_ID = re.compile(r"D:?(\d+):(\d+)")


@dataclass
class Question:
    """One question with the text ids of its evidence turns."""

    text: str
    category: int
    evidence: set[str]


@dataclass
class Conversation:
    """One LoCoMo conversation as a Seelen export, its questions, and when they are asked."""

    name: str
    export: str
    questions: list[Question]
    asked_ms: int
    dropped_ids: int = 0
    skipped: int = 0
    session_of: dict[str, str] = field(default_factory=dict)  # turn id -> session id


def find_data(given: str | None) -> Path:
    """The LoCoMo file: --data, $LOCOMO_FILE, or ../shared/data/locomo-dev upward."""
    candidates = [given, os.environ.get("LOCOMO_FILE")]
    candidates += [str(p / "shared/data" / FILE) for p in HERE.parents]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise SystemExit("LoCoMo data not found: give --data FILE")


def session_start(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_id(name: str, dia_id: str) -> str:
    """The text id of a turn: the conversation and its dia_id ('conv-30-D1-2')."""
    m = _ID.fullmatch(dia_id)
    assert m, dia_id
    return f"{name}-D{int(m[1])}-{int(m[2])}"


def turn_text(turn: dict[str, Any], options: argparse.Namespace) -> str:
    """A turn as stored: the speaker's name and the text (`--names none`: the text alone),
    and a shared photo's caption with `--images caption`."""
    text = str(turn.get("text") or "")
    if options.names == "speaker":
        text = f"{turn['speaker']}: {text}"
    caption = turn.get("blip_caption")
    if caption and options.images == "caption":
        text = f"{text} [image: {caption}]"
    return text


def sessions_of(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(number, start, turns) of each session, in order."""
    out = []
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list) and turns:
            out.append((int(m[1]), session_start(conv[f"{key}_date_time"]), turns))
    return sorted(out, key=lambda s: s[0])


def export_for(
    sample: dict[str, Any], options: argparse.Namespace
) -> tuple[str, dict[str, str], int]:
    """One conversation as a `seelen export --format json` document; also each turn's
    session and the last session's start (ms)."""
    name, conv = sample["sample_id"], sample["conversation"]
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    out, session_of, last = [], {}, 0
    for number, start, turns in sessions_of(conv):
        sid = f"{name}-s{number}"
        rows = []
        for i, turn in enumerate(turns):
            tid = turn_id(name, turn["dia_id"])
            moment = start + timedelta(seconds=TURN_SECONDS * i)
            rows.append(export_turn(tid, moment, roles[turn["speaker"]], turn_text(turn, options)))
            session_of[tid] = sid
        end = start + timedelta(seconds=TURN_SECONDS * len(turns))
        out.append(archived_session(sid, start, end, rows))
        last = max(last, int(start.timestamp() * 1000))
    doc = {"format": "seelen-export", "version": 2, "sessions": out}
    return json.dumps(doc, ensure_ascii=False), session_of, last


def clean_evidence(name: str, given: Sequence[str], known: set[str]) -> tuple[set[str], int]:
    """The evidence's turn ids (split, stray colon mended), and how many ids were dropped
    (no turn number, or naming no turn of the conversation)."""
    found, dropped = set(), 0
    for entry in given:
        parts = entry.replace(";", " ").replace(",", " ").split()
        for part in parts:
            m = _ID.fullmatch(part)
            tid = f"{name}-D{int(m[1])}-{int(m[2])}" if m else None
            if tid is None or tid not in known:
                dropped += 1
                continue
            found.add(tid)
    return found, dropped


def conversations(path: Path, options: argparse.Namespace, only: set[str]) -> list[Conversation]:
    """Every conversation (or those in `only`) with its questions of categories 1-4."""
    out = []
    for sample in json.loads(path.read_text("utf-8")):
        name = sample["sample_id"]
        if only and name not in only:
            continue
        export, session_of, last = export_for(sample, options)
        asked = datetime.fromtimestamp(last / 1000, UTC).replace(hour=12, minute=0)
        conv = Conversation(name, export, [], int((asked + timedelta(days=1)).timestamp() * 1000))
        conv.session_of = session_of
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            evidence, dropped = clean_evidence(name, qa.get("evidence", []), set(session_of))
            conv.dropped_ids += dropped
            if not evidence:
                conv.skipped += 1
                continue
            text = " ".join(str(qa["question"]).split())  # one line each for --batch
            conv.questions.append(Question(text, qa["category"], evidence))
        out.append(conv)
    return out


# --- asking --------------------------------------------------------------------------------


def run_api(conv: Conversation, root: Path, options: argparse.Namespace) -> dict[str, list]:
    """Import and ask in-process through seelen.api, per variant (--without): {variant:
    [the search's JSON object per question]}."""
    settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": options.embedder}
    settings |= BUDGETS[options.budget]
    with Memory.open(root, conv.name, **settings) as memory:
        memory.import_json(conv.export)
        recall = memory._app.recall
        assert recall is not None
        if options.asked_on == "after":
            recall.clock = BenchClock(conv.asked_ms)
        tune(recall, options)
        default = recall.token_budget
        out = {}
        rules = options.context.split(",")
        for without in options.without.split("/"):
            leave_out(recall, without)
            for budget in options.tokens.split(","):
                for rule in rules:  # --context: which neighbours a passage brings
                    recall.token_budget = int(budget) or default
                    recall.context = rule
                    key = without if budget == "0" else f"{without} @{budget}"
                    key += f" ({rule})" if len(rules) > 1 else ""
                    out[key] = [memory.recall(q.text, options.limit) for q in conv.questions]
        return out


def run_cli(conv: Conversation, root: Path, options: argparse.Namespace) -> dict[str, list]:
    """The same through the installed commands: `seelen import --wait`, then one batch
    search."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SEELEN_", "OPENAI_"))},
        "SEELEN_DATA_DIR": str(root),
        "SEELEN_PROFILE": conv.name,
        "TIMEZONE": "UTC",
        "EMBEDDING_PROVIDER": options.embedder,
        **BUDGETS[options.budget],
    }
    command = [options.seelen] if options.seelen else [sys.executable, "-m", "seelen"]
    if options.asked_on == "after":
        if shutil.which("faketime") is None:
            raise SystemExit("--cli --asked-on after needs faketime (apt-get install faketime)")
        moment = datetime.fromtimestamp(conv.asked_ms / 1000, UTC)
        command = ["faketime", "-f", moment.strftime("@%Y-%m-%d %H:%M:%S"), *command]
        env["TZ"] = "UTC"
    path = root / f"{conv.name}.json"
    path.write_text(conv.export, "utf-8")
    # --wait: until every text has its vector (by default `import` returns once keyword search
    # finds everything, and a search right after it would be by keywords alone).
    wait = [*command, "import", *waits(command, env), str(path)]
    subprocess.run(wait, env=env, check=True, capture_output=True)
    lines = "".join(q.text + "\n" for q in conv.questions)
    args = ["memory", "search", "--batch", "--json", "--limit", str(options.limit)]
    done = subprocess.run(
        [*command, *args], env=env, input=lines, text=True, capture_output=True, check=True
    )
    return {"": [json.loads(line) for line in done.stdout.splitlines()]}


def waits(command: list[str], env: dict[str, str]) -> list[str]:
    """`--wait` where `import` has it; an install from before it (--seelen) waited anyway."""
    done = subprocess.run([*command, "import", "--help"], env=env, capture_output=True, text=True)
    return ["--wait"] if "--wait" in done.stdout else []


# --- scoring -------------------------------------------------------------------------------


def ranked(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranked turns, best first (the listing also holds the prompt's context turns)."""
    return sorted((t for t in result["turns"] if t["rank"]), key=lambda t: t["rank"])


def score(q: Question, result: dict[str, Any], session_of: dict[str, str]) -> dict[str, float]:
    """Every measure for one question."""
    ids = [t["text_id"] for t in ranked(result)]
    gold = q.evidence
    first = next((r for r, i in enumerate(ids, start=1) if i in gold), None)
    sessions = list(dict.fromkeys(session_of.get(i, "") for i in ids))[:5]
    wanted = {session_of[i] for i in gold}
    shown = [t for t in result["turns"] if t["in_prompt"]]
    return {
        "R@prompt": len(gold & {t["text_id"] for t in shown}) / len(gold),
        "tokens": sum(len(t["text"]) for t in shown) / 4,
        "turns": len(shown),
        "R@10": len(gold & set(ids[:10])) / len(gold),
        "MRR": 1 / first if first else 0.0,
        "sR@5": len(wanted & set(sessions)) / len(wanted),
        "missed@60": len(gold - set(ids[:60])) / len(gold),
        "sR@10": len(wanted & set(list(dict.fromkeys(session_of.get(i, "") for i in ids))[:10]))
        / len(wanted),
    }


KEYS = ("R@prompt", "tokens", "turns", "R@10", "MRR", "sR@5", "missed@60", "sR@10")


def report(rows: list[tuple[int, dict[str, float]]], title: str) -> dict[str, dict[str, float]]:
    """Means per category and over all; printed as one table."""
    print(f"\n{title}")
    print(f"{'category':<14}{'n':>5}" + "".join(f"{k:>11}" for k in KEYS))
    table = {}
    groups = [(name, [r for c, r in rows if c == cat]) for cat, name in CATEGORIES.items()]
    for name, group in [*groups, ("all", [r for _, r in rows])]:
        if not group:
            continue
        means = {k: sum(r[k] for r in group) / len(group) for k in KEYS}
        table[name] = {"n": len(group), **means}
        cells = "".join(
            f"{means[k]:>11.0f}" if k == "tokens" else f"{means[k]:>11.3f}" for k in KEYS
        )
        print(f"{name:<14}{len(group):>5}{cells}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--cli", action="store_true", help="through the installed commands")
    parser.add_argument(
        "--seelen", help="with --cli: the `seelen` command to measure (another install)"
    )
    parser.add_argument("--asked-on", default="after", choices=("after", "today"))
    parser.add_argument("--limit", type=int, default=60, help="turns ranked per question")
    parser.add_argument("--budget", default="endpoint", choices=tuple(BUDGETS))
    parser.add_argument("--images", default="none", choices=("caption", "none"))
    parser.add_argument("--names", default="speaker", choices=("speaker", "none"))
    parser.add_argument("--only", default="", help="conversations, comma-separated")
    parser.add_argument("--dump", help="write every question's scores and ranking to FILE")
    parser.add_argument(
        "--tokens", default="0", help="recall budgets (RECALL_TOKENS), comma-separated; 0: default"
    )
    parser.add_argument(
        "--embedder",
        default="auto",
        choices=("auto", "local", "multilingual"),
        help="EMBEDDING_PROVIDER (auto: as a user gets it)",
    )
    add_variant_flags(parser)
    options = parser.parse_args()
    if options.cli and (options.without or options.tokens != "0" or options.context != "brief"):
        raise SystemExit("--without, --tokens and --context need the in-process run")
    started = time.perf_counter()
    convs = conversations(
        find_data(options.data), options, set(filter(None, options.only.split(",")))
    )
    how = "commands" if options.cli else "in-process"
    print(
        f"LoCoMo: {len(convs)} conversations, {sum(len(c.questions) for c in convs)} questions, ",
        end="",
    )
    print(
        f"{how}, asked {options.asked_on}, {options.budget} budget, names {options.names}, ", end=""
    )
    print(f"images {options.images}")
    print(f"evidence ids dropped: {sum(c.dropped_ids for c in convs)}, ", end="")
    print(f"questions left without evidence: {sum(c.skipped for c in convs)}")
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {}
    dump = []
    for conv in convs:
        with tempfile.TemporaryDirectory(prefix="seelen-locomo-") as tmp:
            run = run_cli if options.cli else run_api
            for variant, results in run(conv, Path(tmp), options).items():
                for q, result in zip(conv.questions, results, strict=True):
                    row = score(q, result, conv.session_of)
                    rows.setdefault(variant, []).append((q.category, row))
                    if options.dump:
                        dump.append(_dumped(conv, q, result, row, variant))
        print(
            f"  {conv.name}: {len(conv.questions)} q. ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    for variant, got in rows.items():
        report(got, f"== without: {variant or 'nothing'} ==")
    if options.dump:
        Path(options.dump).write_text(json.dumps(dump, ensure_ascii=False, indent=1), "utf-8")
    print(f"({time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f})")


def _dumped(conv: Conversation, q: Question, result: dict, row: dict, variant: str) -> dict:
    """One question's record for --dump: scores, evidence, and where each piece ranked."""
    ids = [t["text_id"] for t in ranked(result)]
    return {
        "conversation": conv.name,
        "variant": variant,
        "question": q.text,
        "category": q.category,
        "evidence": sorted(q.evidence),
        "ranks": {e: (ids.index(e) + 1 if e in ids else None) for e in sorted(q.evidence)},
        "in_prompt": [t["text_id"] for t in result["turns"] if t["in_prompt"]],
        "top": ids[:10],
        **row,
    }


if __name__ == "__main__":
    main()
