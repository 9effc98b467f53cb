"""Configuration a command would otherwise meet late: checked before anything starts.

A mistake in `mcp_servers.json`, or a model setting that cannot work, used to surface only
after the local model had started and the chat's prompt was drawn. `check_start` finds these
first, so each is one `ConfigError` line and exit 2 with nothing started or created. It reads
two small files and imports no heavy module, so the chat's prompt is not delayed.
"""

from __future__ import annotations

from seelen.config import Settings
from seelen.models.provider import choose_provider
from seelen.tools.mcp_config import find_config, load_config


def check_start(settings: Settings, *, model: bool = True, mcp: bool = True) -> None:
    """Raise the ConfigError a start would meet: no model to use (`model`), or an MCP server
    list that is missing, unreadable or not a server list (`mcp`, when ENABLE_MCP is on).

    A single entry's mistake is not checked here: it fails that server only, in one line.
    """
    if model:
        choose_provider(settings)
    if mcp and settings.enable_mcp:
        path = find_config(settings.mcp_servers_file)
        if path is not None:
            load_config(path)
