"""A question's words widened by meaning over the memory's own words (an experiment).

"What books has Tim read?" is answered by "I just finished The Hobbit": no word but the name
in common. Each content word of the question is embedded alone and set beside every word the
memory holds, embedded alone too; the nearest ones ("books" -> novel, reading, author) are
searched by words as a list of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from seelen.store.schema import _STOPWORDS

if TYPE_CHECKING:
    from seelen.models.embed import Embedder
    from seelen.store import Store

_WORD = re.compile(r"[a-z][a-z'-]{2,}")


def words_of(text: str) -> list[str]:
    """The content words of `text`, lowercased, in order, each once."""
    found = (w.strip("'-") for w in _WORD.findall(text.lower()))
    return list(dict.fromkeys(w for w in found if len(w) > 2 and w not in _STOPWORDS))


class Vocabulary:
    """Every distinct word of the memory with its vector (the word embedded alone)."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray) -> None:
        self.words = list(words)
        self.vectors = vectors
        self.at = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, texts: Iterable[str], embedder: Embedder, say: str = "{}") -> Vocabulary:
        words: dict[str, None] = {}
        for text in texts:
            words.update(dict.fromkeys(words_of(text.split(":", 1)[-1])))
        listed = sorted(words)
        return cls(listed, embedder.embed([say.format(w) for w in listed]))

    def near(
        self, word: str, embedder: Embedder, k: int, floor: float, ask: str = "{}"
    ) -> list[tuple[str, float]]:
        """The `k` words closest to `word` (cosine at least `floor`), not `word` itself nor
        a form of it (the same first five letters)."""
        sims = self.vectors @ embedder.embed([ask.format(word)])[0]
        out = []
        for i in np.argsort(-sims):
            if sims[i] < floor or len(out) >= k:
                break
            w = self.words[i]
            if w[:5] == word[:5]:
                continue
            out.append((w, float(sims[i])))
        return out


def expanded(
    question: str,
    names: Iterable[str],
    vocab: Vocabulary,
    embedder: Embedder,
    k: int,
    floor: float,
    ask: str = "{}",
) -> list[str]:
    """The memory's words nearest the question's content words (names left out)."""
    left = {n.lower() for n in names}
    own = [w for w in words_of(question) if w not in left]
    found: dict[str, None] = {}
    for word in own:
        found.update(dict.fromkeys(w for w, _ in vocab.near(word, embedder, k, floor, ask)))
    return [w for w in found if w not in own]


def search_words(
    store: Store, words: Sequence[str], limit: int, speaker: str | None, exclude: str | None
) -> list[tuple[str, float]]:
    """Turns holding `words` by BM25 (the speaker's alone when given)."""
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
    out = [(r[0], r[1]) for r in rows if r[2] != exclude and r[3].startswith(prefix)]
    return out[:limit]
