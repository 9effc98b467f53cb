"""Recall's ranking as plain data, for `seelen memory search --json` and the Python API.

Each object lists the recalled turns and summaries in ranked order with the score they were
ranked by, which rankers found them and at which rank, and `in_prompt`: whether chat, under
the current settings, would put them in the prompt (chat's own recall, cut to its budget).
In the hybrid mode (chat's), after the ranked turns come the other turns the prompt holds: the
context of a recalled turn (`context_for` names it; `rank` and `score` are null) and recalled
turns ranked below the `limit`. Every turn in the prompt carries `passage`, the number of its
session's block in the prompt; `prompt_tokens` is what those blocks cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from seelen.memory.clock import Clock
from seelen.memory.context import SHARES, _fit_items
from seelen.memory.prompts import DatedText
from seelen.memory.recall import Recall, RecalledItem
from seelen.protocol.results import MemoryItem, SearchResult


class Ranking:
    """Runs recall as chat does and describes the result; load once, ask many times."""

    def __init__(self, recall: Recall, clock: Clock, context_tokens: int) -> None:
        self.recall = recall
        self.clock = clock
        self.context_tokens = context_tokens

    def search(self, query: str, limit: int | None = None, mode: str = "hybrid") -> SearchResult:
        """The ranking for `query` (`limit` turns, default chat's)."""
        if not query.strip():
            return SearchResult(query=query, mode=mode)
        listed = self.recall.search(query, None, mode, conv_num=limit or self.recall.conv_num)
        chat = listed if mode == "hybrid" else self.recall.search(query, None)
        # Turns: the passages recall fitted to chat's budget; summaries: the prompt's share.
        prompt = {t.text_id: (n, t) for n, p in enumerate(chat.passages, 1) for t in p.turns}
        summaries = prompt_ids(chat.summaries, self.context_tokens)
        listed_ids = {t.text_id for t in listed.turns}
        # The prompt's other turns (with the hybrid ranking only: another mode's listing is
        # that ranker's, and chat ranks by both).
        others = [t for _, t in prompt.values() if t.text_id not in listed_ids and chat is listed]

        return SearchResult(
            query=query,
            mode=mode,
            ms=round(listed.seconds * 1000, 1),
            prompt_tokens=chat.tokens,
            summaries=[
                self._item(i, r, i.text_id in summaries, None)
                for r, i in enumerate(listed.summaries, 1)
            ],
            turns=[
                *(self._item(i, r, *self._shown(i, prompt)) for r, i in enumerate(listed.turns, 1)),
                *(self._item(t, t.rank or None, *self._shown(t, prompt)) for t in others),
            ],
        )

    @staticmethod
    def _shown(
        item: RecalledItem, prompt: dict[str, tuple[int, RecalledItem]]
    ) -> tuple[bool, tuple[int, str] | None]:
        """Whether `item` is in the prompt, and if so (its block, the hit it is context for)."""
        if item.text_id not in prompt:
            return False, None
        block, shown = prompt[item.text_id]
        return True, (block, shown.context_for)

    def _item(
        self,
        item: RecalledItem,
        rank: int | None,
        in_prompt: bool,
        place: tuple[int, str] | None,
    ) -> MemoryItem:
        summary = item.kind == "summary"
        return MemoryItem(
            rank=rank,
            text_id=item.text_id,
            session_id=item.session_id,
            kind=item.kind,
            time=self.clock.at(item.start_ms).isoformat(timespec="milliseconds"),
            end=self.clock.at(item.end_ms).isoformat(timespec="milliseconds") if summary else None,
            role=None if summary else item.role,
            text=item.text,
            score=item.score if rank is not None else None,
            rankers=dict(sorted(item.sources.items())),
            in_prompt=in_prompt,
            passage=place[0] if place is not None else None,
            context_for=(place[1] or None) if place is not None else None,
        )


def prompt_ids(summaries: Sequence[RecalledItem], context_tokens: int) -> set[str]:
    """Ids of the recalled summaries that chat's prompt keeps within their token share."""
    fitted = _fit_items(_dated(summaries), int(context_tokens * SHARES["related_sessions"]))
    return {d.when for d in fitted}  # `when` carries the id here, see _dated


def _dated(items: Sequence[RecalledItem]) -> list[DatedText]:
    # The prompt's cost counts only the text, so the id can ride in the date's place.
    return [DatedText(item.text_id, item.text, item.role) for item in items]
