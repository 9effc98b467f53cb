"""Candidate first-stage signals for long conversations, measured offline on LoCoMo dev.

Usage: python bench/bench_signals.py [--data FILE] [--only conv-30,conv-41]

Recall's ranking misses evidence it never ranks (LoCoMo dev: .109 of the evidence is not among
the first 60 turns) and sessions it never reaches (session R@5 .871). Before a signal goes
into recall it is measured here, from what Seelen already stores: each conversation is
imported as bench_locomo.py imports it, every turn's stored vector is read back, and for each
question the ranking recall gives today ("pipeline") is set beside each candidate signal.

Sessions (session R@5: the share of the question's evidence sessions among the first five):
- "words": the sessions as wholes by BM25 (whole.py, what recall uses today), the control;
- "centroid": the normalised mean of a session's turn vectors, by cosine to the question;
- "speaker centroid": the same over the turns of the person the question names;
- "best 3 turns" / "best turn": the mean cosine of a session's three closest turns / its
  closest;
- "digest": per session and speaker, the DIGEST_WORDS words that session says most against
  the whole conversation (tf-idf over the conversation's own turns, never the set's
  summaries), embedded as one text "<speaker>: w1, w2, ...", the named speaker's digests
  only;
- "speaker words": BM25 over the named speaker's turns of each session alone, and its
  control "all words" (the same tokenizer over both speakers' turns);
and each fused (reciprocal rank) with "words" and with "pipeline".

Turns (R@10, MRR, missed@60), each candidate list fused with the pipeline's ranking at half
a vote, beside the control of fusing the plain vector list so (a signal recall already has:
what fusing alone costs):
- "speaker vector": the vector search restricted to the named speaker's turns;
- "topic cluster": that score plus each turn's mean closeness to the speaker's ten turns
  closest to the question (weighted by their closeness): turns about one topic rise together;
- "first person": the question rewritten as the speaker would say it ("What books has Tim
  read?" -> "What books has I read", "Tim's" -> "my") and embedded.

Quality only; no timing. The numbers are in docs/benchmarks.md ("Tried and dropped").
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import BUDGETS, CATEGORIES, Conversation, conversations, find_data, ranked
from bench_recall import BenchClock

from seelen.api import Memory
from seelen.memory.names import for_meaning
from seelen.memory.whole import sessions_by_words
from seelen.models.embed import embed_query

DIGEST_WORDS = 12  # a digest's words: about one short sentence, not tuned
SEEDS = 10  # the speaker's turns closest to the question that make a topic, not tuned
HALF = 0.5  # a candidate turn list's vote against the pipeline's 1: the in-session weight
_STOP = set(
    "the a an and or but to of in on at for with is are was were be been it its this that i "
    "you he she we they my your me so just what how have has had do did does not no can will "
    "would could about from as by if all some like get got go there their them our us which "
    "who when where why might really too very thanks hey wow great".split()
)


@dataclass
class Stored:
    """One conversation as recall holds it: every turn's id, vector, session, speaker, text."""

    ids: list[str]
    vectors: np.ndarray
    sessions: np.ndarray
    speakers: np.ndarray
    texts: list[str]


@dataclass
class Asked:
    """One question: its evidence, vector, named speaker, and what recall ranks today."""

    text: str
    category: int
    evidence: set[str]
    vector: np.ndarray
    named: str | None
    pipeline: list[str]  # turn ids, best first
    words: list[str]  # sessions as wholes by BM25, best first


def words_of(text: str) -> list[str]:
    """Content words, a plural's s cut (a stand-in for FTS5's stemmer, same on both sides)."""
    found = [w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2]
    return [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in found]


def fused(lists: Sequence[Sequence[str]], weights: Sequence[float] | None = None) -> list[str]:
    """Reciprocal-rank fusion (k 60, as recall's), best first."""
    scores: dict[str, float] = defaultdict(float)
    for n, ids in enumerate(lists):
        for rank, i in enumerate(ids, start=1):
            scores[i] += (weights[n] if weights else 1.0) / (60 + rank)
    return sorted(scores, key=lambda i: -scores[i])


def collect(conv: Conversation, root: Path) -> tuple[Stored, list[Asked], Any]:
    """Import `conv`, read its vectors back, and ask every question once."""
    settings = {"TIMEZONE": "UTC", "EMBEDDING_PROVIDER": "auto", **BUDGETS["endpoint"]}
    memory = Memory.open(root, conv.name, **settings)
    memory.import_json(conv.export)
    recall = memory._app.recall
    recall.clock = BenchClock(conv.asked_ms)
    probe = np.ones(recall.index.dim, dtype=np.float32)
    hits = recall.index.search("turns", probe / np.linalg.norm(probe), 1_000_000)
    turns = recall.store.get_turns(h.text_id for h in hits)
    texts = [turns[h.text_id].text for h in hits]
    stored = Stored(
        [h.text_id for h in hits],
        np.stack([h.vector for h in hits]),
        np.array([h.session_id for h in hits]),
        np.array([t.split(":", 1)[0] for t in texts]),
        [t.split(":", 1)[-1] for t in texts],
    )
    people = sorted(set(stored.speakers))
    asked = []
    for q in conv.questions:
        named = next((p for p in people if re.search(rf"\b{re.escape(p)}\b", q.text)), None)
        vector = embed_query(recall.embedder, for_meaning(recall.store, q.text))
        result = memory.recall(q.text, 60)
        pipeline = [t["text_id"] for t in ranked(result)]
        words = sessions_by_words(recall.store, q.text, 1000, None)
        asked.append(Asked(q.text, q.category, q.evidence, vector, named, pipeline, words))
    return stored, asked, memory


def bm25(docs: dict[Any, Counter[str]], query: list[str]) -> list[Any]:
    """The keys of `docs` (word -> turns holding it) by BM25 of `query`, best first."""
    count = len(docs)
    mean = float(np.mean([sum(d.values()) for d in docs.values()]))
    held = Counter(w for d in docs.values() for w in d)
    scores = {}
    for key, doc in docs.items():
        norm = 1.2 * (0.25 + 0.75 * sum(doc.values()) / mean)
        scores[key] = sum(
            math.log(1 + (count - held[w] + 0.5) / (held[w] + 0.5)) * doc[w] * 2.2 / (doc[w] + norm)
            for w in set(query)
            if w in doc
        )
    return sorted(scores, key=lambda k: -scores[k])


class SessionSignals:
    """Every session ranking of one conversation, per question."""

    def __init__(self, stored: Stored, embedder: Any) -> None:
        self.s = stored
        self.names = sorted(set(stored.sessions))
        self.centroids = self._means([stored.sessions == n for n in self.names])
        self.pairs = [(n, p) for n in self.names for p in sorted(set(stored.speakers))]
        masks = [(stored.sessions == n) & (stored.speakers == p) for n, p in self.pairs]
        self.pair_means = self._means(masks)
        self.docs: dict[Any, Counter[str]] = defaultdict(Counter)
        self.own: dict[Any, Counter[str]] = defaultdict(Counter)
        for n, p, text in zip(stored.sessions, stored.speakers, stored.texts, strict=True):
            self.docs[n].update(set(words_of(text)))
            self.own[(n, p)].update(set(words_of(text)))
        digests = [f"{p}: {', '.join(self._distinct(self.own[(n, p)]))}" for n, p in self.pairs]
        self.digests = np.asarray(embedder.embed(digests))

    def _means(self, masks: list[np.ndarray]) -> np.ndarray:
        dim = self.s.vectors.shape[1]
        rows = [self.s.vectors[m].mean(0) if m.any() else np.zeros(dim) for m in masks]
        out = np.stack(rows)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    def _distinct(self, doc: Counter[str]) -> list[str]:
        pairs = len(self.own)
        held = Counter(w for d in self.own.values() for w in d)
        weight = {w: n * math.log(pairs / held[w]) for w, n in doc.items()}
        return sorted(weight, key=lambda w: -weight[w])[:DIGEST_WORDS]

    def _by_pair(self, scores: np.ndarray, named: str | None) -> list[str]:
        keep = [named is None or p == named for _, p in self.pairs]
        order = np.argsort(-np.where(keep, scores, -9.0))
        return list(dict.fromkeys(self.pairs[i][0] for i in order))

    def rankings(self, q: Asked) -> dict[str, list[str]]:
        sims = self.s.vectors @ q.vector
        per = [np.sort(sims[self.s.sessions == n]) for n in self.names]
        best3 = np.array([p[-3:].mean() for p in per])
        query = [w for w in words_of(q.text) if q.named is None or w != q.named.lower()]
        mine = {k: d for k, d in self.own.items() if q.named is None or k[1] == q.named}
        out = {
            "pipeline": list(
                dict.fromkeys(self.s.sessions[self.s.ids.index(i)] for i in q.pipeline)
            ),
            "words": q.words,
            "centroid": [self.names[i] for i in np.argsort(-(self.centroids @ q.vector))],
            "speaker centroid": self._by_pair(self.pair_means @ q.vector, q.named),
            "best 3 turns": [self.names[i] for i in np.argsort(-best3)],
            "best turn": [self.names[i] for i in np.argsort(-np.array([p[-1] for p in per]))],
            "digest": self._by_pair(self.digests @ q.vector, q.named),
            "all words": bm25(self.docs, query),
            "speaker words": list(dict.fromkeys(k[0] for k in bm25(mine, query))),
        }
        for name in list(out)[2:]:
            out[f"words + {name}"] = fused([q.words, out[name]])
            out[f"pipeline + {name}"] = fused([out["pipeline"], out[name]])
        return out


def turn_rankings(s: Stored, q: Asked, rewritten: np.ndarray) -> dict[str, list[str]]:
    """The pipeline's ranking, and it fused with each candidate turn list at HALF a vote."""
    ids = np.array(s.ids)
    sims = s.vectors @ q.vector
    mine = s.speakers == q.named if q.named else np.ones(len(ids), dtype=bool)
    own = np.where(mine, sims, -9.0)
    seeds = np.argsort(-own)[:SEEDS]
    weight = np.maximum(sims[seeds], 0.0)
    topic = (s.vectors @ s.vectors[seeds].T * weight).sum(1) / max(weight.sum(), 1e-9)
    lists = {
        "vector (control)": sims,
        "speaker vector": own,
        "topic cluster": np.where(mine, sims + topic, -9.0),
        "first person": s.vectors @ rewritten,
    }
    out = {"pipeline": q.pipeline}
    for name, scores in lists.items():
        out[f"+ {name}"] = fused([q.pipeline, list(ids[np.argsort(-scores)][:60])], [1.0, HALF])
    return out


def first_person(q: Asked) -> str:
    """The question as its named speaker would ask it of themselves."""
    if q.named is None:
        return q.text
    text = re.sub(rf"\b{re.escape(q.named)}'s\b", "my", q.text.rstrip("?"))
    return re.sub(rf"\b{re.escape(q.named)}\b", "I", text)


def measured(q: Asked, session_of: dict[str, str], rankings: dict[str, list[str]], kind: str):
    """(name, {measure: value}) per ranking of `kind` ("sessions" or "turns")."""
    wanted = {session_of[e] for e in q.evidence}
    for name, order in rankings.items():
        if kind == "sessions":
            yield name, {"sR@5": len(wanted & set(order[:5])) / len(wanted)}
            continue
        first = next((r for r, i in enumerate(order, start=1) if i in q.evidence), None)
        yield (
            name,
            {
                "R@10": len(q.evidence & set(order[:10])) / len(q.evidence),
                "MRR": 1 / first if first else 0.0,
                "missed@60": len(q.evidence - set(order[:60])) / len(q.evidence),
            },
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="the LoCoMo JSON file (a list of conversations)")
    parser.add_argument("--only", default="", help="conversations, comma-separated")
    options = parser.parse_args()
    shape = argparse.Namespace(names="speaker", images="none")
    only = set(filter(None, options.only.split(",")))
    rows: dict[tuple[str, str], list[tuple[int, dict[str, float]]]] = defaultdict(list)
    for conv in conversations(find_data(options.data), shape, only):
        with tempfile.TemporaryDirectory(prefix="seelen-signals-") as tmp:
            stored, asked, memory = collect(conv, Path(tmp))
            embedder = memory._app.recall.embedder
            sessions = SessionSignals(stored, embedder)
            again = np.asarray(embedder.embed([first_person(q) for q in asked]))
            for q, rewritten in zip(asked, again, strict=True):
                for kind, got in (
                    ("sessions", sessions.rankings(q)),
                    ("turns", turn_rankings(stored, q, rewritten)),
                ):
                    for name, row in measured(q, conv.session_of, got, kind):
                        rows[(kind, name)].append((q.category, row))
            memory.close()
        print(f"  {conv.name}: {len(asked)} q.", file=sys.stderr)
    print(f"{'signal':34s} {'all':>20s} " + " ".join(f"{c:>20s}" for c in CATEGORIES.values()))
    for (kind, name), got in rows.items():
        cells = []
        for cat in (None, *CATEGORIES):
            picked = [r for c, r in got if cat is None or c == cat]
            keys = list(got[0][1])
            cells.append("/".join(f"{np.mean([r[k] for r in picked] or [0]):.3f}" for k in keys))
        print(f"{kind[0]} {name:32s} " + " ".join(f"{c:>20s}" for c in cells))
    print("sessions: session R@5; turns: R@10 / MRR / missed@60")


if __name__ == "__main__":
    main()
