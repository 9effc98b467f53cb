"""Packages whose `__init__` Seelen defers (seelen/deferred.py): what Seelen calls works
without running them, and any other name still loads on first use."""

from __future__ import annotations

import subprocess
import sys

from model_server import ModelServer, Reply

CODE = """
import asyncio, sys
from seelen.models.chat import OpenAIChatModel
from seelen.models.embed import OpenAIEmbedder

async def main():
    model = OpenAIChatModel(base_url=sys.argv[1], api_key="k", model="m", max_retries=0)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    parts = [p async for p in model.stream([{"role": "user", "content": "hi"}], tools)]
    print(type(parts[-1]).__name__, parts[-1].tool_calls[0].name)
    await model.aclose()

asyncio.run(main())
print(OpenAIEmbedder(sys.argv[1], "k", "e", dim=16).embed(["a", "b"]).shape)
deferred = [m for m in ("openai.types", "openai.types.responses")
            if "__getattr__" in vars(sys.modules[m])]
print(deferred)
import openai
print(openai.types.Batch.__name__, openai.types.responses.Response.__name__)
print("__getattr__" in vars(openai.types))
"""


def test_a_streamed_tool_call_and_embeddings_leave_openais_other_types_unloaded(
    model_server: ModelServer,
) -> None:
    """If an openai release starts needing its whole `types` at import or for these calls,
    this fails loudly rather than letting every start-up slow down again."""
    model_server.enqueue(Reply(tool_calls=[{"name": "f", "arguments": {}}]))
    result = subprocess.run(
        [sys.executable, "-c", CODE, model_server.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Completion f",
        "(2, 16)",
        "['openai.types', 'openai.types.responses']",  # neither `__init__` ran
        "Batch Response",  # names only the real `__init__` defines, loaded on first use
        "False",
    ]
