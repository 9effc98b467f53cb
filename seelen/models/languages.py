"""Which texts the English embedding model can read, and whether a memory needs more.

all-MiniLM-L6-v2 (the fast default) was trained on English: Chinese, Russian or German text
gets vectors that carry little of its meaning. multilingual-e5-small reads about a hundred
languages, but embeds a question in ~14 ms instead of ~4 ms (bench/bench_recall.py
--speed) and is slightly worse on English paraphrase. So `EMBEDDING_PROVIDER=auto` uses
MiniLM while a memory is English and the multilingual model once the user writes in
another language. The check is a cheap heuristic, not a language identifier: it only has
to tell "English" from "something MiniLM cannot read".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Letters of scripts other than Latin (Greek, Cyrillic, Hebrew, Arabic, Indic, Thai,
# Hangul, kana, Han…): a word in any of them is one MiniLM cannot read.
_OTHER_SCRIPT = re.compile(
    r"[\u0370-\u03ff\u0400-\u052f\u0590-\u06ff\u0900-\u0e7f\u1100-\u11ff"
    r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
_WORD = re.compile(r"[^\W\d_]+")
# The commonest words of English and of the commonest Latin-script languages besides it
# (German, Spanish, French, Italian, Portuguese, Dutch), leaving out words that are English
# too ("in", "was", "die", "hat"): function words are a third of any sentence, so a few
# of them name its language where a dictionary would be megabytes.
_ENGLISH = frozenset(
    "the a an and or but of to in on at for with from by is are was were be been am i you he"
    " she it we they my your his her its our their me him us them this that these those what"
    " which who how when where why do does did have has had not no yes so if as can will would"
    " just there here about all some any".split()
)
_FOREIGN = frozenset(
    "der das und ist nicht ich ein eine einen mit auf für sich dem des zu von sie wir ihr es"
    " sind habe aber auch noch wie bei nach mein meine dein heute el la los las y que de por"
    " para un del se lo mi su muy pero como está estoy tengo fue hoy yo le les et je ne pas"
    " il elle une du au avec sur mais ce cette mon mes très suis été lo gli di che sono una"
    " della oggi os não com eu meu minha hoje muito het een ik niet op te dat zijn maar ook"
    " voor wat".split()
)
# A Latin-script text of at least MIN_WORDS words is taken for another language when at
# least FOREIGN_SHARE of its words are such words and they outnumber the English ones
# (measured: 0 of 566 MemoryBank English user turns and 0 of 726 synthetic ones flagged;
# German, Spanish and French chat lines have 20-50%). Shorter texts say too little.
MIN_WORDS = 6
FOREIGN_SHARE = 0.15
# A memory needs the multilingual model when this share of its recent user turns, and at
# least MIN_OTHER of them, are not English: one quoted name in another script is not a
# language the user writes in; a few turns in a hundred are.
OTHER_SHARE = 0.02
MIN_OTHER = 3
# How many of the newest user turns are looked at (their first SAMPLE_CHARS characters):
# enough to see a language the user writes in now. Read and checked in ~15 ms (1,000 English
# turns: 1 ms the query, 14 ms the check; load 0.7 on 2 cores), at each start with `auto`
# while the stored vectors are MiniLM's.
SAMPLE_TURNS = 1000
SAMPLE_CHARS = 400


def reads_as_english(text: str) -> bool:
    """False for text in a script other than Latin, or in a Latin-script language other
    than English; True otherwise (including text too short to tell)."""
    if _OTHER_SCRIPT.search(text):
        return False
    words = _WORD.findall(text.lower())
    if len(words) < MIN_WORDS:
        return True
    foreign = sum(w in _FOREIGN for w in words)
    return foreign < FOREIGN_SHARE * len(words) or foreign <= sum(w in _ENGLISH for w in words)


def needs_multilingual(texts: Sequence[str]) -> bool:
    """True when enough of `texts` (a memory's recent user turns) are not English."""
    other = sum(not reads_as_english(t) for t in texts)
    return other >= MIN_OTHER and other >= OTHER_SHARE * len(texts)
