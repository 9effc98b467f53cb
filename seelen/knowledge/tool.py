"""The `knowledge_search` tool: the model's own, deeper look into the user's notes."""

from __future__ import annotations

import asyncio
from typing import Annotated

from seelen.knowledge.library import Knowledge
from seelen.protocol.text import notes_text
from seelen.tools.local import LocalTool, tool


def knowledge_search_tool(knowledge: Knowledge, budget_tokens: int) -> LocalTool:
    """`knowledge_search` over `knowledge`, answering within `budget_tokens`."""

    @tool
    async def knowledge_search(
        query: Annotated[str, "names, places, topics or words to look for in the notes"],
    ) -> str:
        """Search the user's own notes and documents (their knowledge folders) and return
        the best passages with their file and heading. Use it to look deeper than the notes
        already shown, or for a different angle on the question."""
        found = await asyncio.to_thread(knowledge.search, query, budget_tokens)
        return notes_text(found)

    return knowledge_search
