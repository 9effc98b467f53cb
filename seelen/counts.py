"""Counts in words, for every front-end: "1 turn", "2 turns", and line numbers as ranges.

Standard library only, at the bottom of the layers: the store's and the indexer's own
lines use it as the chat, the commands and the MCP server do.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """ "1 summary", "2 summaries": a count with its noun in the right number (`plural`
    when adding an s would not do)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def number_ranges(numbers: list[int]) -> str:
    """Ascending numbers as ranges: [3, 4, 5, 9] -> "3-5, 9"."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
