"""Recall on real conversations: MemoryBank (MIT), labelled by hand in memorybank_labels.json.

Usage: python bench/bench_memorybank.py [--data DIR] [--lang en,cn] [--cli] [--limit 10]
                                        [--embedder auto|local|multilingual]

Each person's ten days become one profile: each date a session (archived, no summary: the
dataset has none), each exchange a user and an assistant turn, dated that day. The profile is
built by importing an export-format JSON (the same code as `seelen import`); the questions are
asked through the same ranking as `seelen memory search --json` (with --cli, through the real
commands: `seelen import FILE` and `seelen memory search --batch --json`). For each question:
R@k is the share of its labelled turns among the first k turns, MRR the reciprocal rank of the
first one. Reported per language and per mode (bm25, vector, hybrid, at --limit turns), and
"chat": only the turns chat would put in its prompt (its own turn count and token budget).

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seelen.api import Memory

HERE = Path(__file__).resolve().parent
LABELS = HERE / "memorybank_labels.json"
MODES = ("bm25", "vector", "hybrid")
# "chat": what chat would put in the prompt (default turn count and budget, `in_prompt`).
ROWS = (*MODES, "chat")
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
                turns.append(
                    {
                        "text_id": text_id(lang, person, date, i, role),
                        "time": moment.isoformat(timespec="milliseconds"),
                        "role": role,
                        "text": str(pair.get(key) or ""),
                    }
                )
        end = day + timedelta(minutes=len(history[date]), seconds=30)
        sessions.append(
            {
                "session_id": f"{slug(lang, person)}-{date}",
                "status": "archived",
                "start": day.isoformat(timespec="milliseconds"),
                "end": end.isoformat(timespec="milliseconds"),
                "summary": None,
                "rolling_summary": None,
                "turns": turns,
            }
        )
    return json.dumps({"format": "seelen-export", "version": 2, "sessions": sessions})


def score(ranked: Sequence[str], gold: set[str]) -> dict[str, float]:
    """R@5, R@10 (share of gold turns found) and reciprocal rank of the first gold turn."""
    first = next((r for r, i in enumerate(ranked, start=1) if i in gold), None)
    return {
        "R@5": len(gold & set(ranked[:5])) / len(gold),
        "R@10": len(gold & set(ranked[:10])) / len(gold),
        "MRR": 1 / first if first else 0.0,
    }


def run_api(
    root: Path, name: str, export: str, questions: list[str], limit: int, embedder: str
) -> dict:
    """Import and search in-process through seelen.api; {mode: [ranked ids per question]}."""
    with Memory.open(root, name, TIMEZONE="UTC", EMBEDDING_PROVIDER=embedder) as memory:
        memory.import_json(export)
        out = {}
        for mode in MODES:
            found = [memory.recall(q, limit, mode)["turns"] for q in questions]
            out[mode] = [[t["text_id"] for t in turns] for turns in found]
        chat = [memory.recall(q)["turns"] for q in questions]
        out["chat"] = [[t["text_id"] for t in turns if t["in_prompt"]] for turns in chat]
        return out


def run_cli(
    root: Path, name: str, export: str, questions: list[str], limit: int, embedder: str
) -> dict:
    """The same through the installed commands, one process per import and per mode."""
    env = {**os.environ, "SEELEN_DATA_DIR": str(root), "SEELEN_PROFILE": name, "TIMEZONE": "UTC"}
    env["EMBEDDING_PROVIDER"] = embedder
    command = [sys.executable, "-m", "seelen"]
    path = root / f"{name}.json"
    path.write_text(export, "utf-8")
    subprocess.run([*command, "import", str(path)], env=env, check=True, capture_output=True)
    out = {}
    lines = "".join(q.replace("\n", " ") + "\n" for q in questions)
    for mode in MODES:
        args = ["memory", "search", "--json", "--batch", "--limit", str(limit), "--mode", mode]
        done = subprocess.run(
            [*command, *args], env=env, input=lines, text=True, capture_output=True, check=True
        )
        found = [json.loads(line)["turns"] for line in done.stdout.splitlines()]
        out[mode] = [[t["text_id"] for t in turns] for turns in found]
    return out


def bench_language(
    data: Path, lang: str, labels: dict, use_cli: bool, limit: int, embedder: str
) -> dict:
    """Scores of every labelled question of one language, per mode."""
    people = json.loads((data / FILES[lang]).read_text("utf-8"))
    by_mode: dict[str, list[dict[str, float]]] = {m: [] for m in ROWS}
    skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        for p, (name, person) in enumerate(people.items()):
            items = [x for x in labels[lang].get(name.strip(), []) if x["turns"]]
            skipped += len(labels[lang].get(name.strip(), [])) - len(items)
            if not items:
                continue
            export = export_for(lang, p, person["history"])
            questions = [x["question"] for x in items]
            run = run_cli if use_cli else run_api
            ranked = run(Path(tmp), slug(lang, p), export, questions, limit, embedder)
            for mode in ranked:
                for x, ids in zip(items, ranked[mode], strict=True):
                    gold = {text_id(lang, p, d, i, r) for d, i, r in x["turns"]}
                    by_mode[mode].append(score(ids, gold))
    return {"scores": by_mode, "unlabelled": skipped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the MemoryBank folder")
    parser.add_argument("--lang", default="en,cn")
    parser.add_argument("--cli", action="store_true", help="go through the seelen commands")
    parser.add_argument("--limit", type=int, default=10, help="turns listed per question")
    parser.add_argument(
        "--embedder",
        default="auto",
        choices=("auto", "local", "multilingual"),
        help="EMBEDDING_PROVIDER (auto: as a user gets it)",
    )
    args = parser.parse_args()
    data = find_data(args.data)
    labels = json.loads(LABELS.read_text("utf-8"))
    started = time.perf_counter()
    print(f"embedder: {args.embedder}")
    print(f"{'lang':<5}{'mode':<8}{'n':>5}{'R@5':>8}{'R@10':>8}{'MRR':>8}")
    for lang in args.lang.split(","):
        result = bench_language(data, lang, labels, args.cli, args.limit, args.embedder)
        for mode in ROWS:
            rows = result["scores"][mode]
            if not rows:
                continue
            means = {k: sum(r[k] for r in rows) / max(len(rows), 1) for k in ("R@5", "R@10", "MRR")}
            print(
                f"{lang:<5}{mode:<8}{len(rows):>5}{means['R@5']:>8.3f}"
                f"{means['R@10']:>8.3f}{means['MRR']:>8.3f}"
            )
        if result["unlabelled"]:
            print(f"{lang}: {result['unlabelled']} questions have no supporting turn (skipped)")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
