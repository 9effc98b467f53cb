"""Lifts after fusion that read the turns themselves: the assistant's replies, for a question
about what it said, and the user's answer to a matching question the assistant asked.

Both look only at the best candidates and their spoken neighbours (one or two small queries);
the arithmetic is in fusion.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seelen.memory.fusion import Fused, lift_replies, spread_to_neighbours

if TYPE_CHECKING:
    from seelen.memory.reads import TurnReads

# The user's answer to a matching question: each of the NEAR_FROM best turns in which the
# assistant asks something ("Which soup did you make?") passes NEAR_SHARE of its score to the
# turn spoken right after it ("Pumpkin, with sage."), which holds what the user told and often
# shares no word with what is asked later. Half a vote's share, as the other lifts (0.25 was
# measured too: LoCoMo dev MRR +.019 against +.036 at 0.5 with any asker). Measured, and
# dropped: both neighbours of every strong turn (LoCoMo R@10 +.028, but MemoryBank MRR -.02
# and the synthetic set -.07: its acknowledgements were lifted), and answers to the user's own
# questions too (the assistant's advice lifted: MemoryBank several-days MRR .641 → .581).
NEAR_FROM = 10
NEAR_SHARE = 0.5
_ASKS = ("?", "？")


def replies_lifted(reads: TurnReads, fused: Fused, depth: int) -> Fused:
    """The ranking for a question about the assistant's words (fusion.lift_replies): among
    the first `depth`, the replies to the candidates the user said, and the assistant's
    turns lifted."""
    head = fused[:depth]
    found = reads.get_turns(i for i, _, _ in head)
    asked = [i for i, t in found.items() if t.role == "user"]
    after = {i: pair[1] for i, pair in reads.spoken_around(asked).items() if pair[1]}
    found |= reads.get_turns(a for a in after.values() if a not in found)
    assistant = {i for i, t in found.items() if t.role == "assistant"}
    replies = {i: a for i, a in after.items() if a in assistant}
    return lift_replies(head, replies, assistant) + fused[len(head) :]


def answers_lifted(reads: TurnReads, fused: Fused, share: float) -> Fused:
    """The ranking with the answer to each of the NEAR_FROM best turns that asks a question
    given `share` of that turn's score (fusion.spread_to_neighbours)."""
    top = reads.get_turns(i for i, _, _ in fused[:NEAR_FROM])
    asking = [
        i for i, t in top.items() if t.role == "assistant" and t.text.rstrip().endswith(_ASKS)
    ]
    around = {i: (None, after) for i, (_, after) in reads.spoken_around(asking).items()}
    return spread_to_neighbours(fused, around, share)
