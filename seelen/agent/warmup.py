"""Keeping a local model server's prompt cache warm between questions.

llama.cpp keeps the prompt it last evaluated and reuses its longest common beginning with
the next one. Seelen's prompt begins with what stays the same from one question to the next
(the system message and the live turns, `memory.context.prefix_messages`), so having the
server read that beginning ahead of time (at start, and after each answer, when the reply
joined it) leaves a question only its own tokens to evaluate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from seelen.errors import ModelError
from seelen.models.chat import ChatModel, Usage

log = logging.getLogger(__name__)


class PromptWarmer:
    """Sends the next prompt's beginning to the model server in the background."""

    def __init__(self, model: ChatModel, prefix: Callable[[], list[dict[str, Any]]]) -> None:
        self.model = model
        self.prefix = prefix  # builds the messages (reads SQLite: run in a thread)
        self.active = False  # warm after answers too; off until `start`
        self._again = False  # the prompt's beginning changed since the warm-up on its way began
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Warm now, and again after every answer (`soon`)."""
        self.active = True
        self.soon()

    def soon(self) -> None:
        """Warm in the background (once more after a warm-up already on its way)."""
        if not self.active:
            return
        self._again = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._warm_while_changed())

    async def _warm_while_changed(self) -> None:
        while self._again:
            self._again = False
            await self.warm()

    async def warm(self) -> Usage | None:
        """Send the prompt's beginning now; the server's usage (None if it failed: only a
        head start is lost, as the question sends the whole prompt anyway)."""
        messages = await asyncio.to_thread(self.prefix)
        try:
            usage = await self.model.prefill(messages)
        except ModelError as exc:
            log.debug("prompt warm-up failed: %s", exc)
            return None
        if usage is not None:
            log.debug(
                "prompt warmed: %d tokens, %d cached", usage.prompt_tokens, usage.cached_tokens
            )
        return usage

    async def aclose(self) -> None:
        """Stop a warm-up on its way (before the model's connections close)."""
        self.active = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
