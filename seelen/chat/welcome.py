"""What the chat says as it starts: its welcome line, and which model answers when the user
has configured none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from seelen.models.nearby import NearbyServers

WELCOME = "[dim]Seelen is listening. /help for commands, Ctrl-D to leave.[/dim]"
# Said at each start on the bundled model when no model is configured and no server on this
# machine was found to suggest: a newcomer otherwise takes its answers for Seelen's best.
ON_BUNDLED = (
    "The small bundled model answers (to try Seelen out): for a better one, set "
    "OPENAI_API_KEY (with OPENAI_BASE_URL and CHAT_MODEL for another provider) in .env"
)


async def model_hints(nearby: NearbyServers | None) -> list[Text]:
    """On the bundled model for want of settings (`nearby` given): the servers that answer on
    this machine and how to chat with one, once per profile (`seelen.models.nearby`); else
    how to set a model up. Nothing when a model is configured or LLM_PROVIDER=local chose it."""
    if nearby is None:
        return []
    lines = await nearby.news()
    return [Text(line, "yellow") for line in lines] or [Text(ON_BUNDLED, "dim")]
