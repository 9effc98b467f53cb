"""Words that carry no subject: a question that shares only these with a note is not about it.

In a folder of a few notes, "is", "the" or "today" can be rare enough for BM25 to weigh them,
so "how is the weather today" found every note holding "is" or "today". These words are the
grammar of a question (pronouns, articles, auxiliaries, prepositions, conjunctions, question
words, and the deictic "today"/"now"), never what it asks about; a note is found only through
the question's other words. The lists are short on purpose: a word left out costs little
(BM25 still weighs it by rarity), a content word put in would hide notes.
"""

from __future__ import annotations

from seelen.knowledge.text import is_cjk

ENGLISH = frozenset(
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves tell know please today tonight ever still yet let lets shall may might
    must dont didnt doesnt isnt wasnt arent im ive youre thats whats hows s t
    """.split()
)

# Chinese function characters: pronouns, particles, auxiliaries, question words, common
# adverbs and conjunctions. A CJK term (a bigram, or a lone character) made only of these,
# such as 我们 "we", 什么 "what" or 怎么 "how", asks about nothing.
CHINESE = frozenset(
    "的了是在我你他她它们这那个有和也就都不吗呢吧啊么什怎样哪谁把被给对从向为与及或而但还又再很太最更要会能可以已经自己吧呀哦嗯"
)


def is_function_word(term: str) -> bool:
    """True for a term (as `text.terms` makes them) that only carries grammar."""
    if is_cjk(term):
        return all(char in CHINESE for char in term)
    return term in ENGLISH
