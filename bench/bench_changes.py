"""When a fact changes: does recall rank the newest statement first for a question about the
present, and the one that held then for a question about a past time?

Usage: python bench/bench_changes.py [--seed 7] [--without near,...] [-v]

A year of weekly chats (bench/recall_data.py's small talk), imported through Seelen's export
format. Ten facts (recall_data.CHANGES: where the user lives, the job, the partner, the diet…)
are stated once in the first months and changed months later; small talk about the same
topics (the table's near misses) falls between and after. Asked the day after the last chat:
- "now": one question per fact that says it asks about the present ("Where do I live now?",
  written for this bench); "present": the table's two present-tense questions per fact
  ("Which city do I live in?", "Where is home for me at the moment?");
- "as of": one question per fact about a month between the two statements ("Which city did
  I live in in March 2024?"), written for this bench.
A "now" or "present" question is right when the newest statement ranks above the old one (and
first, for the stricter count); an "as of" question when the old one ranks above the newest.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memorybank import archived_session, export_turn
from bench_recall import BenchClock, add_variant_flags, leave_out, tune
from recall_data import CHANGES, chit_chat

from seelen.api import Memory

START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)  # a Monday evening
WEEKS = 48
# A question about a month between the two statements, per CHANGES row ({when}: "March 2024").
AS_OF = [
    "Which city did I live in in {when}?",
    "What was my job in {when}?",
    "Who was I dating in {when}?",
    "What diet was I on in {when}?",
    "Which gym did I go to in {when}?",
    "How long was my commute in {when}?",
    "How long was my hair in {when}?",
    "Which show was I watching in {when}?",
    "What book was I reading in {when}?",
    "Who was my GP in {when}?",
]
# The same present-tense question with "now" in it (the "Where do I live now?").
NOW = [
    "Where do I live now?",
    "What is my job now?",
    "Who is my partner now?",
    "What do I eat now?",
    "Where do I work out now?",
    "What is my commute like now?",
    "What is my hair like now?",
    "What show am I watching now?",
    "What am I reading now?",
    "Who is my doctor now?",
]
REPLIES = ["Got it.", "Good to know!", "Thanks for telling me.", "Ha, I see.", "Sounds nice."]


@dataclass
class Question:
    text: str
    kind: str  # "now" | "present" | "as of"
    new: str
    old: str


def build(seed: int) -> tuple[str, list[Question], int]:
    """The export, the questions, and when they are asked (ms)."""
    rng = random.Random(seed)
    rows = [line.split("|") for line in CHANGES.strip().splitlines()]
    said: dict[int, list[tuple[str, str]]] = {w: [] for w in range(WEEKS)}
    for i, row in enumerate(rows):
        old_week, new_week = rng.randrange(1, 10), rng.randrange(24, 36)
        said[old_week].append((row[1], f"old-{i}"))
        said[new_week].append((row[2], f"new-{i}"))
        for text in row[7].split("/"):  # the same topic, between and after
            said[rng.randrange(old_week + 1, new_week)].append((text, ""))
            said[rng.randrange(new_week + 1, WEEKS)].append((text, ""))
    sessions, ids = [], {}
    for week in range(WEEKS):
        lines = [(chit_chat(rng), "") for _ in range(rng.randint(4, 7))] + said[week]
        rng.shuffle(lines)
        start = START + timedelta(weeks=week)
        turns = []
        for n, (text, key) in enumerate(lines):
            tid = f"w{week:02d}-{n:02d}"
            if key:
                ids[key] = f"{tid}-u"
            for role, words, offset in (("user", text, 0), ("assistant", rng.choice(REPLIES), 30)):
                moment = start + timedelta(minutes=n, seconds=offset)
                turns.append(export_turn(f"{tid}-{role[0]}", moment, role, words))
        end = start + timedelta(minutes=len(lines))
        sessions.append(archived_session(f"week-{week:02d}", start, end, turns))
    questions = []
    for i, row in enumerate(rows):
        new, old = ids[f"new-{i}"], ids[f"old-{i}"]
        for text in (row[3], row[4]):
            questions.append(Question(text, "present", new, old))
        questions.append(Question(NOW[i], "now", new, old))
        old_week = int(old[1:3])
        between = START + timedelta(weeks=old_week + 6)
        questions.append(Question(AS_OF[i].format(when=f"{between:%B %Y}"), "as of", new, old))
    asked = START + timedelta(weeks=WEEKS, days=1)
    doc = {"format": "seelen-export", "version": 2, "sessions": sessions}
    return json.dumps(doc), questions, int(asked.timestamp() * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("-v", "--verbose", action="store_true", help="list every question")
    add_variant_flags(parser)
    options = parser.parse_args()
    export, questions, asked = build(options.seed)
    settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": "local"}
    with tempfile.TemporaryDirectory() as tmp, Memory.open(tmp, "changes", **settings) as memory:
        memory.import_json(export)
        recall = memory._app.recall
        assert recall is not None
        recall.clock = BenchClock(asked)
        tune(recall, options)
        for without in options.without.split("/"):
            leave_out(recall, without)
            print(f"== without: {without or 'nothing'} ==")
            report(memory, questions, options.verbose)


def report(memory: Memory, questions: list[Question], verbose: bool) -> None:
    """How often the statement asked for ranks above the other one, and first."""
    counts: dict[str, list[int]] = {"now": [0, 0, 0], "present": [0, 0, 0], "as of": [0, 0, 0]}
    for q in questions:
        ids = [t["text_id"] for t in memory.recall(q.text, 20)["turns"] if t["rank"]]
        want, other = (q.old, q.new) if q.kind == "as of" else (q.new, q.old)
        rank = ids.index(want) + 1 if want in ids else None
        beaten = ids.index(other) + 1 if other in ids else None
        above = rank is not None and (beaten is None or rank < beaten)
        counts[q.kind][0] += above
        counts[q.kind][1] += rank == 1
        counts[q.kind][2] += 1
        if verbose:
            print(f"  [{q.kind}] {q.text!r}: wanted at {rank}, the other at {beaten}")
    for kind, (above, first, n) in counts.items():
        print(f"{kind:>7}: the statement asked for above the other {above}/{n}, first {first}/{n}")


if __name__ == "__main__":
    main()
