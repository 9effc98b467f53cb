"""What a term is, and how a note is cut into heading-aware chunks.

A term is a folded word of an alphabetic script, or a character bigram of a CJK run. Bigrams
let the folder's own text decide what a Chinese or Japanese "word" is: a name such as 林小雨
becomes the bigrams 林小 and 小雨, which occur next to each other wherever the name does, and
how rare each bigram is in the folder says how much it counts. No word list is involved.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from seelen.memory.context import estimate_tokens, exceeds

# CJK radicals, kana, bopomofo, CJK ideographs (A and basic), Hangul syllables, compatibility
# ideographs: scripts written without spaces between words.
_CJK = "\u2e80-\u2fff\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")

# A chunk is the unit of ranking: about a long paragraph or two. 240 tokens (~1,000 English
# characters, ~240 Chinese ones) is small enough that four or five fit the knowledge share of
# the default 8,000-token prompt, and large enough to carry a scene or a profile section.
CHUNK_TOKENS = 240


def fold(word: str) -> str:
    """Lower-case a word and drop accents, so "José" and "jose" are one term."""
    word = word.lower()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def terms(text: str) -> list[str]:
    """The terms of `text` in order: folded words and CJK bigrams (a lone CJK char as is)."""
    out: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text)):
        run, word = match.group(1), match.group(2)
        if word:
            out.append(fold(word))
        elif len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def term_text(text: str) -> str:
    """`terms(text)` joined by spaces: what the full-text index stores for a text."""
    return " ".join(terms(text))


def is_cjk(term: str) -> bool:
    """True for a CJK term (a bigram or a lone character)."""
    return bool(re.fullmatch(rf"[{_CJK}]+", term))


@dataclass(frozen=True)
class Chunk:
    """A piece of a note: its heading path ("Part 1 › The harbour") and its text."""

    heading: str
    text: str


def chunks(text: str, markdown: bool) -> list[Chunk]:
    """Cut a note into chunks of about `CHUNK_TOKENS`, never across a Markdown heading."""
    out: list[Chunk] = []
    for heading, body in _sections(text, markdown):
        out.extend(Chunk(heading, piece) for piece in _pack(body))
    return out


def _sections(text: str, markdown: bool) -> Iterator[tuple[str, str]]:
    """(heading path, body) per section; the heading line stays in its section's body."""
    if not markdown:
        yield "", text
        return
    stack: list[tuple[int, str]] = []
    start, heading = 0, ""
    for match in _HEADING.finditer(text):
        yield heading, text[start : match.start()]
        level = len(match.group(1))
        stack = [(lvl, title) for lvl, title in stack if lvl < level]
        stack.append((level, match.group(2).strip()))
        heading = " › ".join(title for _, title in stack)
        start = match.start()
    yield heading, text[start:]


def _pack(body: str) -> Iterator[str]:
    """Group paragraphs into pieces of at most `CHUNK_TOKENS`; split longer paragraphs."""
    piece: list[str] = []
    used = 0
    for paragraph in _PARAGRAPH.split(body):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        for part in _split_long(paragraph):
            cost = estimate_tokens(part)
            if piece and used + cost > CHUNK_TOKENS:
                yield "\n\n".join(piece)
                piece, used = [], 0
            piece.append(part)
            used += cost
    if piece:
        yield "\n\n".join(piece)


_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*")


def _split_long(paragraph: str) -> Iterator[str]:
    """A paragraph over the chunk size, cut at sentence ends (or hard, if it has none)."""
    if estimate_tokens(paragraph) <= CHUNK_TOKENS:
        yield paragraph
        return
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        while exceeds(sentence, CHUNK_TOKENS):  # no sentence end for too long
            cut = _chars_for(sentence, CHUNK_TOKENS)
            if current:
                yield current
                current = ""
            yield sentence[:cut]
            sentence = sentence[cut:]
        if current and exceeds(current + " " + sentence, CHUNK_TOKENS):
            yield current
            current = ""
        current = f"{current} {sentence}".strip() if current else sentence
    if current:
        yield current


def _chars_for(text: str, tokens: int) -> int:
    """How many leading characters of `text` fit in `tokens` (at least one). No more than
    4 * `tokens` do (a character costs at least a quarter token), so each probe estimates
    a chunk's length, not the rest of the text: a 2 MB paragraph without a sentence end
    took 13 s of CPU to cut (quadratic), and takes 0.1 s."""
    lo, hi = 1, min(len(text), 4 * tokens)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo
