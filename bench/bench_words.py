"""A question's words widened by meaning over the memory's own words, measured on LoCoMo dev.

Usage: python bench/bench_words.py [--only conv-30] [--k 5] [--floor 0.5] [--weight 0.5]
                                   [--show misses.json] [--speaker-only]

Each conversation is imported as bench_locomo.py imports it; every distinct word of its turns
is embedded alone (MiniLM); each question's content words (the speakers' names left out) are
set beside them, and the `k` nearest (cosine at least `floor`) are searched by BM25 as one
more list, fused at `weight` of a vote ("words_near"). Prints the measures with and without
that list on the same index, and (`--show` a bench_locomo --dump file) the neighbours found
for the multi-hop and open-domain questions whose evidence was missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from types import SimpleNamespace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import BUDGETS, conversations, find_data, report, score
from bench_recall import BenchClock

from seelen.api import Memory
from seelen.memory.expand import Vocabulary, expanded, search_words
from seelen.memory.names import common_names
from seelen.memory.speakers import named_speaker


def patch(recall: Any, options: argparse.Namespace, seen: dict) -> None:
    """Add the widened words' list to `recall`'s direct searches."""
    direct = recall._direct

    def widened(query: str, current: str | None, mode: str, notices: list[str]) -> Any:
        pending, vector = direct(query, current, mode, notices)
        if not recall.expand_on:
            return pending, vector
        names = common_names(recall.store, query)
        v = recall.expand_on
        speaker = named_speaker(names) if v.speaker else None
        words = expanded(query, names, v.vocab, recall.embedder, v.k, v.floor, v.ask)
        seen[query] = words
        def hits() -> list[SimpleNamespace]:
            found = search_words(recall.store, words, recall.candidates, speaker, current)
            return [SimpleNamespace(text_id=i, score=s, vector=None) for i, s in found]

        pending["t:words_near"] = recall._run(hits)
        return pending, vector

    recall._direct = widened
    recall.weights["words_near"] = options.weight


@dataclass
class Variant:
    """One setting of the widened words: k nearest at cosine >= floor, the question word
    embedded as `ask` (a template), the memory's words as `say`, the speaker's turns only."""

    k: int
    floor: float
    ask: str
    say: str
    speaker: bool
    vocab: Any = None

    @property
    def label(self) -> str:
        who = " speaker" if self.speaker else ""
        return f"k {self.k} >= {self.floor} {self.ask!r}/{self.say!r}{who}"


def variants(text: str) -> list[Variant]:
    """'5:0.5:{}:{}:1;...' as Variants."""
    out = []
    for part in filter(None, text.split(";")):
        k, floor, ask, say, speaker = part.split(":")
        out.append(Variant(int(k), float(floor), ask, say, speaker == "1"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data")
    parser.add_argument("--only", default="")
    parser.add_argument("--variants", default="5:0.5:{}:{}:0", help="k:floor:ask:say:speaker;...")
    parser.add_argument("--weight", type=float, default=0.5)
    parser.add_argument("--show", help="a bench_locomo --dump file: print misses' neighbours")
    parser.add_argument("--limit", type=int, default=60)
    options = parser.parse_args()
    options.names, options.images = "speaker", "none"
    convs = conversations(find_data(options.data), options, set(filter(None, options.only.split(","))))
    chosen = variants(options.variants)
    rows: dict[str, list] = {"before": [], **{v.label: [] for v in chosen}}
    shown = json.loads(Path(options.show).read_text()) if options.show else []
    started, words_total, embed_s = time.perf_counter(), 0, 0.0
    for conv in convs:
        with tempfile.TemporaryDirectory(prefix="seelen-words-") as tmp:
            settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": "auto", **BUDGETS["endpoint"]}
            with Memory.open(Path(tmp), conv.name, **settings) as memory:
                memory.import_json(conv.export)
                recall = memory._app.recall
                recall.clock = BenchClock(conv.asked_ms)
                texts = [r[0] for r in recall.store._query("SELECT text FROM conversation")]
                t0 = time.perf_counter()
                vocabs = {say: Vocabulary.build(texts, recall.embedder, say) for say in {v.say for v in chosen}}
                for v in chosen:
                    v.vocab = vocabs[v.say]
                embed_s += time.perf_counter() - t0
                words_total += len(next(iter(vocabs.values())).words)
                seen: dict[str, list[str]] = {}
                patch(recall, options, seen)
                for label, on in [("before", None), *((v.label, v) for v in chosen)]:
                    recall.expand_on = on
                    for q in conv.questions:
                        result = memory.recall(q.text, options.limit)
                        rows[label].append((q.category, score(q, result, conv.session_of)))
                for d in shown:
                    if d["conversation"] == conv.name and d["category"] in (1, 3) and d["missed@60"]:
                        texts_of = recall.store.get_turns(
                            e for e, r in d["ranks"].items() if r is None
                        )
                        print(f"\nQ: {d['question']}\n  near: {seen.get(d['question'])}")
                        for t in texts_of.values():
                            print(f"  miss: {t.text[:110]}")
        print(f"  {conv.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    print(f"vocabulary: {words_total} words, embedded in {embed_s:.1f} s")
    for label, got in rows.items():
        report(got, label)


if __name__ == "__main__":
    main()
