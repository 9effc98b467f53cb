"""Would vectors for the sentences of long turns find LoCoMo's evidence? Measured offline.

Usage: python bench/bench_pieces.py [--data FILE] [--only conv-30] [--min-chars 0,150,250]

A long turn holds several sentences, and its one vector (the mean of its word pieces) dilutes
the sentence that answers: "Tim: Thanks! I just finished The Hobbit, and we're going to Rome
next month. How was the gig?" is about three things. This asks whether a turn's vector plus
one vector per sentence, the turn scored by the best of them (max-pooled), ranks the evidence
higher, before anyone builds that into the index. Only the vector ranker is measured, alone
and over the whole conversation (no fusion, no session searches): the share of evidence turns
among its first 10 / 30 (the depth a ranker hands to fusion, `Recall.candidates`) / 60 turns,
per category, for the turn vector alone and for the turn with its sentences, sentences kept
only for turns of at least `--min-chars` characters (a sentence is cut at . ! ? and a space;
a turn of one sentence gets none). Each sentence is embedded as "<speaker>: <sentence>", as
its turn is stored (bench_locomo.py). The question is embedded as recall embeds it on LoCoMo:
without the two speakers' names (names.py leaves out the names most turns hold).

The cost is printed beside it: sentences per turn, and the seconds the bundled embedder took
for the turns and for the sentences (the import would pay both; note the load).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import CATEGORIES, conversations, find_data, sessions_of, turn_id, turn_text

from seelen.memory.names import without
from seelen.models.embed import LocalEmbedder

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
DEPTHS = (10, 30, 60)


def pieces_of(sample: dict, options: argparse.Namespace) -> tuple[list[str], list[str], list]:
    """The turn ids, their stored texts, and (turn index, speaker, sentence) of every turn
    holding more than one sentence."""
    conv = sample["conversation"]
    ids, texts, sentences = [], [], []
    for _, _, turns in sessions_of(conv):
        for turn in turns:
            ids.append(turn_id(sample["sample_id"], turn["dia_id"]))
            texts.append(turn_text(turn, options))
            parts = [p for p in _SENTENCE_END.split(str(turn.get("text") or "")) if p.strip()]
            if len(parts) > 1:
                sentences += [(len(ids) - 1, turn["speaker"], p) for p in parts]
    return ids, texts, sentences


def ranks(scores: np.ndarray) -> np.ndarray:
    """Each turn's rank (1 = best) under `scores`."""
    order = np.argsort(-scores, kind="stable")
    out = np.empty(len(order), dtype=int)
    out[order] = np.arange(1, len(order) + 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--only", default="", help="conversations, comma-separated")
    parser.add_argument("--min-chars", default="0,150,250", help="turn lengths given sentences")
    options = parser.parse_args()
    options.names, options.images = "speaker", "none"
    path = find_data(options.data)
    only = set(filter(None, options.only.split(",")))
    convs = {c.name: c for c in conversations(path, options, only)}

    embedder = LocalEmbedder()
    bounds = [int(x) for x in options.min_chars.split(",")]
    hits: dict[tuple[str, str], np.ndarray] = {}
    totals = {"turns": 0, "turn_s": 0.0, "sentence_s": 0.0, **{f"kept{b}": 0 for b in bounds}}
    for sample in json.loads(path.read_text("utf-8")):
        if sample["sample_id"] not in convs:
            continue
        ids, texts, sentences = pieces_of(sample, options)
        started = time.perf_counter()
        turn_vectors = embedder.embed(texts)
        totals["turn_s"] += time.perf_counter() - started
        started = time.perf_counter()
        sentence_vectors = embedder.embed([f"{s}: {p}" for _, s, p in sentences])
        totals["sentence_s"] += time.perf_counter() - started
        totals["turns"] += len(ids)
        owner = np.array([i for i, _, _ in sentences], dtype=int)
        conv = sample["conversation"]
        names = [conv["speaker_a"], conv["speaker_b"]]
        questions = convs[sample["sample_id"]].questions
        asked = embedder.embed([without(q.text, names) for q in questions])
        where = {t: i for i, t in enumerate(ids)}
        for bound in bounds:
            keep = np.array([len(texts[i]) >= bound for i in owner], dtype=bool)
            totals[f"kept{bound}"] += int(keep.sum())
            for q, vector in zip(questions, asked, strict=True):
                for label, scores in _variants(turn_vectors, sentence_vectors, owner, keep, vector):
                    rank = ranks(scores)
                    row = hits.setdefault((f"{label}{bound}", CATEGORIES[q.category]), np.zeros(4))
                    for e in q.evidence:
                        row += [1, *(rank[where[e]] <= d for d in DEPTHS)]
    _report(hits, totals, bounds)


def _variants(turns, sentences, owner, keep, vector):
    """(label, each turn's score): the turn vector alone, and with its kept sentences."""
    plain = turns @ vector
    pooled = plain.copy()
    if keep.any():
        np.maximum.at(pooled, owner[keep], sentences[keep] @ vector)
    return (("turn", plain), ("pieces>=", pooled))


def _report(hits: dict, totals: dict, bounds: list[int]) -> None:
    print(
        f"{'variant':<14}{'category':<13}{'n':>5}" + "".join(f"{'@' + str(d):>8}" for d in DEPTHS)
    )
    for (label, category), row in sorted(hits.items()):
        if label.startswith("turn") and label != f"turn{bounds[0]}":
            continue  # the turn vector alone does not depend on the bound
        name = "turn" if label.startswith("turn") else label
        cells = "".join(f"{row[i] / row[0]:>8.3f}" for i in range(1, 4))
        print(f"{name:<14}{category:<13}{int(row[0]):>5}{cells}")
    turns = totals["turns"]
    kept = ", ".join(f">={b} chars {totals[f'kept{b}'] / turns:.2f}" for b in bounds)
    print(f"sentences per turn: {kept}")
    print(
        f"embedding: {turns} turns {totals['turn_s']:.1f} s, every sentence "
        f"{totals['sentence_s']:.1f} s (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
