"""A question's words widened by meaning over the memory's own words, measured on LoCoMo dev.

Usage: python bench/bench_words.py [--data FILE] [--only conv-30] [--show dump.json]
                                   [--variants "k:floor:ask:say:speaker:weight;..."]

"What books has Tim read?" is answered by "I just finished The Hobbit": no word but the name
in common. Each conversation is imported as bench_locomo.py imports it; every distinct word
of its turns is embedded alone (MiniLM, or in the template `say`, "I like {}"); each content
word of a question (the speakers' names left out) is embedded alone (or as `ask`, "What
{}?"), and its `k` nearest words of the memory (cosine at least `floor`; not a form of the
word itself: the same first five letters) are searched by BM25 (FTS5, the turns' own index)
as one more list, fused at `weight` of a vote ("words_near"); with `speaker` 1, among the
named speaker's turns alone (speakers.py's rule). No synonym list, nothing from LoCoMo's
annotations. Prints the measures with and without that list on the same index, how many of
the multi-hop and open-domain evidence turns a bench_locomo.py --dump ranking missed hold a
widened word (`--show`), and those questions' widened words (`-v`).

Quality only; the numbers are in docs/benchmarks.md ("Tried and dropped").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import BUDGETS, conversations, find_data, report, score
from bench_recall import BenchClock

from seelen.api import Memory
from seelen.memory.names import common_names
from seelen.memory.speakers import named_speaker
from seelen.store.schema import _STOPWORDS

_WORD = re.compile(r"[a-z][a-z'-]{2,}")


def words_of(text: str) -> list[str]:
    """The content words of `text`, lowercased, in order, each once."""
    found = (w.strip("'-") for w in _WORD.findall(text.lower()))
    return list(dict.fromkeys(w for w in found if len(w) > 2 and w not in _STOPWORDS))


class Vocabulary:
    """Every distinct word of a memory's turns (the speaker's name cut), each embedded."""

    def __init__(self, texts: list[str], embedder: Any, say: str) -> None:
        words: dict[str, None] = {}
        for text in texts:
            words.update(dict.fromkeys(words_of(text.split(":", 1)[-1])))
        self.words = sorted(words)
        self.vectors = embedder.embed([say.format(w) for w in self.words])

    def near(self, vector: np.ndarray, word: str, k: int, floor: float) -> list[str]:
        """The `k` words closest to `vector` (cosine at least `floor`), not a form of
        `word` (the same first five letters)."""
        sims = self.vectors @ vector
        out: list[str] = []
        for i in np.argsort(-sims):
            if sims[i] < floor or len(out) >= k:
                break
            if self.words[i][:5] != word[:5]:
                out.append(self.words[i])
        return out


@dataclass
class Variant:
    """One setting: `k` nearest at cosine >= `floor`, the question's word embedded in `ask`,
    the memory's in `say`, the named speaker's turns only, the list's vote."""

    k: int
    floor: float
    ask: str
    say: str
    speaker: bool
    weight: float
    vocab: Any = None
    reached: int = 0  # missed evidence turns holding a widened word
    missed: int = 0

    @property
    def label(self) -> str:
        who = " speaker" if self.speaker else ""
        return f"k {self.k} >= {self.floor} {self.ask!r}/{self.say!r}{who} x{self.weight}"

    def widened(self, question: str, names: set[str], embedder: Any) -> list[str]:
        """The memory's words nearest the question's content words (names left out)."""
        left = {n.lower() for n in names}
        own = [w for w in words_of(question) if w not in left]
        if not own:
            return []
        vectors = embedder.embed([self.ask.format(w) for w in own])
        found: dict[str, None] = {}
        for word, vector in zip(own, vectors, strict=True):
            found.update(dict.fromkeys(self.vocab.near(vector, word, self.k, self.floor)))
        return [w for w in found if w not in own]


def variants(text: str) -> list[Variant]:
    """'5:0.5:{}:{}:1:0.5;...' as Variants."""
    out = []
    for part in filter(None, text.split(";")):
        k, floor, ask, say, speaker, weight = part.split(":")
        out.append(Variant(int(k), float(floor), ask, say, speaker == "1", float(weight)))
    return out


def search_words(store: Any, words: list[str], limit: int, speaker: str | None, exclude: Any):
    """Turns holding `words` by BM25, best first (the speaker's alone when given)."""
    if not words:
        return []
    match = "text : (" + " OR ".join('"' + w.replace('"', "") + '"' for w in words) + ")"
    rows = store._query(
        "SELECT c.text_id, -f.rank, c.session_id, c.text FROM (SELECT rowid, rank FROM "
        "conversation_fts WHERE conversation_fts MATCH ? ORDER BY rank LIMIT ?) f "
        "JOIN conversation c ON c.seq = f.rowid ORDER BY f.rank",
        (match, limit * 4),
    )
    prefix = f"{speaker}:" if speaker else ""
    found = [r for r in rows if r[2] != exclude and r[3].startswith(prefix)][:limit]
    return [SimpleNamespace(text_id=r[0], score=r[1], vector=None) for r in found]


def patch(recall: Any, seen: dict[str, list[str]]) -> None:
    """Add the widened words' list (`recall.widen`, a Variant or None) to the direct searches."""
    direct = recall._direct

    def widened(query: str, current: Any, mode: str, notices: list[str]) -> Any:
        pending, vector = direct(query, current, mode, notices)
        v: Variant | None = recall.widen
        if v is None:
            return pending, vector
        names = common_names(recall.store, query)
        speaker = named_speaker(names) if v.speaker else None
        words = seen[query] = v.widened(query, names, recall.embedder)
        args = (recall.store, words, recall.candidates, speaker, current)
        pending["t:words_near"] = recall._run(search_words, *args)
        return pending, vector

    recall._direct = widened


def reach(v: Variant, dump: list[dict], name: str, seen: dict, store: Any, verbose: bool) -> None:
    """Count the multi-hop and open-domain evidence turns the dump's ranking missed, and
    those of them holding a widened word."""
    for d in dump:
        if d["conversation"] != name or d["category"] not in (1, 3):
            continue
        words = set(seen.get(d["question"], []))
        missed = store.get_turns(e for e, r in d["ranks"].items() if r is None)
        if verbose and missed:
            print(f"Q: {d['question']}\n  widened: {sorted(words)}")
        for t in missed.values():
            v.missed += 1
            v.reached += bool(words & set(words_of(t.text.split(":", 1)[-1])))
            if verbose:
                print(f"  missed: {t.text[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data")
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--variants", default="5:0.5:{}:{}:1:0.5", help="k:floor:ask:say:speaker:weight;..."
    )
    parser.add_argument("--show", help="a bench_locomo.py --dump file of the ranking before")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the misses' words")
    parser.add_argument("--limit", type=int, default=60)
    options = parser.parse_args()
    options.names, options.images = "speaker", "none"
    only = set(filter(None, options.only.split(",")))
    convs = conversations(find_data(options.data), options, only)
    chosen = variants(options.variants)
    rows: dict[str, list] = {"before": [], **{v.label: [] for v in chosen}}
    dump = json.loads(Path(options.show).read_text()) if options.show else []
    started, words, embedding = time.perf_counter(), 0, 0.0
    for conv in convs:
        with tempfile.TemporaryDirectory(prefix="seelen-words-") as tmp:
            settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": "auto", **BUDGETS["endpoint"]}
            with Memory.open(Path(tmp), conv.name, **settings) as memory:
                memory.import_json(conv.export)
                recall = memory._app.recall
                recall.clock = BenchClock(conv.asked_ms)
                texts = [r[0] for r in recall.store._query("SELECT text FROM conversation")]
                t0 = time.perf_counter()
                vocabs = {s: Vocabulary(texts, recall.embedder, s) for s in {v.say for v in chosen}}
                embedding += time.perf_counter() - t0
                words += len(next(iter(vocabs.values())).words)
                seen: dict[str, list[str]] = {}
                patch(recall, seen)
                for v in [None, *chosen]:
                    recall.widen = v
                    if v is not None:
                        v.vocab = vocabs[v.say]
                        recall.weights["words_near"] = v.weight
                    label = v.label if v is not None else "before"
                    for q in conv.questions:
                        result = memory.recall(q.text, options.limit)
                        rows[label].append((q.category, score(q, result, conv.session_of)))
                    if v is not None:
                        reach(v, dump, conv.name, seen, recall.store, options.verbose)
        print(f"  {conv.name} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    print(f"vocabulary: {words} words a template, {len(chosen and vocabs)} templates, ", end="")
    print(f"embedded in {embedding:.1f} s")
    for v in chosen if dump else []:
        print(f"{v.label}: {v.reached} of {v.missed} missed evidence turns hold a widened word")
    for label, got in rows.items():
        report(got, label)


if __name__ == "__main__":
    main()
