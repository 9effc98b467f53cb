"""What `seelen mcp` announces (its tools with their schemas and annotations, resources, the
prompt), kept in `catalog.json` beside this file so that the stdio server answers `tools/list`
without importing the MCP SDK: the SDK's server costs 0.8 s of CPU to import, longer than a
client such as Codex CLI waits before it asks its model anything.

The file is generated from the SDK server that `--http` serves (`build_server`), so both
announce the same: `python -m seelen.mcp_server.catalog` writes it, and a test fails when it
differs from what the SDK would announce now.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

CATALOG = Path(__file__).with_name("catalog.json")
# The handshake's protocol revisions this server speaks, oldest to newest (those the SDK's
# `initialize` negotiates; the newer stateless era needs the SDK, which `--http` has).
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


# Any: the JSON of the definitions, as MCP's `tools/list`, `resources/list` and
# `prompts/list` carry them.
def load() -> dict[str, Any]:
    """The definitions as the stdio server announces them."""
    data: dict[str, Any] = json.loads(CATALOG.read_text("utf-8"))
    return data


# Any: as in `load`.
def generate() -> dict[str, Any]:
    """The definitions as the SDK's server announces them (imports the SDK)."""
    from seelen.config import load_settings
    from seelen.mcp_server.server import build_server

    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings({"SEELEN_DATA_DIR": folder}, environ={}, dotenv_path=None)
        server = build_server(settings, knowledge=True)

        async def definitions() -> dict[str, Any]:
            def dump(items: list[Any]) -> list[Any]:
                return [i.model_dump(by_alias=True, exclude_none=True, mode="json") for i in items]

            return {
                "protocol_versions": list(PROTOCOL_VERSIONS),
                "tools": dump(await server.list_tools()),
                "resources": dump(await server.list_resources()),
                "prompts": dump(await server.list_prompts()),
            }

        return asyncio.run(definitions())


def render(data: dict[str, Any]) -> str:
    """The file's text: stable, so that a check compares it byte for byte."""
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


if __name__ == "__main__":
    CATALOG.write_text(render(generate()), "utf-8")
    print(f"wrote {CATALOG}", file=sys.stderr)
