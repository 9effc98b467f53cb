"""`seelen import --summarize`: the tool model writes the summaries of imported sessions.

Only on request: an import calls no model by default (each session's summary is made up of
its title and opening). What a run would send is estimated first, so the user can stop
before paying for it. Each summary is recorded when it is written, so a run that is cut
short (or a model that fails) resumes with the sessions not yet summarised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from seelen.counts import counted
from seelen.memory.context import estimate_tokens
from seelen.memory.imports.conversation import Conversation, stable_id
from seelen.memory.sessions import SUMMARY_TOKENS, RefusedAnswer, Sessions


@dataclass(frozen=True)
class Estimate:
    """What summarising would cost: requests, tokens sent, and at most tokens answered."""

    session_ids: tuple[str, ...]
    tokens_in: int
    tokens_out_max: int

    def describe(self, model: str) -> str:
        """One line for the user, before anything is sent."""
        n = len(self.session_ids)
        return (
            f"Summarising {counted(n, 'conversation')} with {model or 'the tool model'}: "
            f"{counted(n, 'request')}, about {self.tokens_in:,} tokens in and at "
            f"most {self.tokens_out_max:,} out."
        )


def estimate(sessions: Sessions, conversations: Iterable[Conversation]) -> Estimate:
    """The imported sessions still without a model's summary, and what summarising costs."""
    store = sessions.store
    todo, tokens = [], 0
    for conversation in conversations:
        session_id = stable_id(conversation.source, conversation.key)
        turns = store.turns(session_id)
        if not turns or "summary" in store.archive_steps(session_id):
            continue
        todo.append(session_id)
        tokens += sum(estimate_tokens(m["content"]) for m in sessions.summary_request(turns))
    return Estimate(tuple(todo), tokens, len(todo) * SUMMARY_TOKENS)


async def summarize_all(
    sessions: Sessions, session_ids: Sequence[str], progress: Callable[[int], None]
) -> int:
    """Summarise each session; returns how many summaries the model refused (those keep
    their opening). Any other model error stops the run: what is done stays done."""
    refused = 0
    for n, session_id in enumerate(session_ids, start=1):
        try:
            await sessions.summarize(session_id)
        except RefusedAnswer:
            refused += 1
        progress(n)
    return refused
