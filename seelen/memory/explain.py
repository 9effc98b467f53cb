"""Recall's ranking as plain data, for `seelen memory search --json` and the Python API.

Each object lists the recalled turns and summaries in ranked order with the score they were
ranked by, which rankers found them and at which rank, and `in_prompt`: whether chat, under
the current settings, would put them in the prompt (chat's own recall, cut to its budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seelen.memory.clock import Clock
from seelen.memory.context import SHARES, _fit_items
from seelen.memory.prompts import DatedText
from seelen.memory.recall import Recall, RecalledItem


class Ranking:
    """Runs recall as chat does and describes the result; load once, ask many times."""

    def __init__(self, recall: Recall, clock: Clock, context_tokens: int) -> None:
        self.recall = recall
        self.clock = clock
        self.context_tokens = context_tokens

    def search(self, query: str, limit: int | None = None, mode: str = "hybrid") -> dict[str, Any]:
        """The ranking for `query` as one JSON-ready object (`limit` turns, default chat's)."""
        if not query.strip():
            return {"query": query, "mode": mode, "ms": 0.0, "summaries": [], "turns": []}
        listed = self.recall.search(query, None, mode, conv_num=limit or self.recall.conv_num)
        chat = listed if mode == "hybrid" else self.recall.search(query, None)
        # Turns: recall marks those within chat's budget; summaries: the prompt's share.
        shown = {t.text_id for t in chat.turns if t.in_prompt}
        shown |= prompt_ids(chat.summaries, self.context_tokens)
        return {
            "query": query,
            "mode": mode,
            "ms": round(listed.seconds * 1000, 1),
            "summaries": [self._item(i, r, shown) for r, i in enumerate(listed.summaries, 1)],
            "turns": [self._item(i, r, shown) for r, i in enumerate(listed.turns, 1)],
        }

    def _item(self, item: RecalledItem, rank: int, shown: set[str]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rank": rank,
            "text_id": item.text_id,
            "session_id": item.session_id,
            "time": self.clock.at(item.start_ms).isoformat(timespec="milliseconds"),
        }
        if item.kind == "summary":
            data["end"] = self.clock.at(item.end_ms).isoformat(timespec="milliseconds")
        else:
            data["role"] = item.role
        return {
            **data,
            "text": item.text,
            "score": item.score,
            "rankers": dict(sorted(item.sources.items())),
            "in_prompt": item.text_id in shown,
        }


def prompt_ids(summaries: Sequence[RecalledItem], context_tokens: int) -> set[str]:
    """Ids of the recalled summaries that chat's prompt keeps within their token share."""
    fitted = _fit_items(_dated(summaries), int(context_tokens * SHARES["related_sessions"]))
    return {d.when for d in fitted}  # `when` carries the id here, see _dated


def _dated(items: Sequence[RecalledItem]) -> list[DatedText]:
    # The prompt's cost counts only the text, so the id can ride in the date's place.
    return [DatedText(item.text_id, item.text, item.role) for item in items]
