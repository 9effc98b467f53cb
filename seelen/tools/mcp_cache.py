"""What each MCP server offers, cached on disk, so a server starts only when it is needed.

One JSON file in the profile folder (`mcp_tools.json`, 0600, replaced atomically) holds,
per server, a digest of its config entry (after `${VAR}` expansion) and what the server
offered the last time it was connected: its tools (name, description, input schema), how
many task-only tools were left out, and its resources. An entry whose digest does not match
the server's current config is never used, so editing `mcp_servers.json` (or a variable it
reads) means one fresh connection. Nothing here imports fastmcp.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.files import atomic_write
from seelen.tools.mcp_config import RemoteServer, StdioServer
from seelen.tools.mcp_content import needs_tasks

if TYPE_CHECKING:  # the SDK's types only: importing them at run time costs start-up
    from mcp.types import Resource as Listing
    from mcp.types import ResourceTemplate, Tool

CACHE_FILE = "mcp_tools.json"
# Bumped when the file's shape changes: an older file is then ignored, not misread.
FORMAT = 1


@dataclass(frozen=True)
class Listed:
    """One tool as its server listed it."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One resource a server offers: its URI and the first line of what it is."""

    uri: str
    about: str = ""


@dataclass(frozen=True)
class Offer:
    """Everything a server offers the model: tools, resources, and how many task-only tools
    (which Seelen cannot run) were left out."""

    tools: tuple[Listed, ...]
    resources: tuple[Resource, ...] = ()
    skipped: int = 0

    def to_json(self) -> dict[str, Any]:
        """The offer as plain JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Offer:
        """An offer read back; anything malformed raises (ValueError, KeyError, TypeError)."""
        tools = tuple(
            Listed(str(t["name"]), str(t["description"]), dict(t["schema"])) for t in data["tools"]
        )
        resources = tuple(Resource(str(r["uri"]), str(r["about"])) for r in data["resources"])
        return cls(tools, resources, int(data["skipped"]))


def offer_of(
    listed: Iterable[Tool], resources: Iterable[Listing | ResourceTemplate], server: str
) -> Offer:
    """A live server's tool and resource listings (fastmcp objects) as an `Offer`."""
    tools, skipped = [], 0
    for item in listed:
        if needs_tasks(item):
            skipped += 1
            continue
        schema = dict(item.input_schema or {})
        schema.setdefault("type", "object")
        text = item.description or item.title or f"{item.name} (MCP server {server})"
        tools.append(Listed(item.name, text, schema))
    found = [_resource(r) for r in resources]
    return Offer(tuple(tools), tuple(found), skipped)


def _resource(item: Listing | ResourceTemplate) -> Resource:
    """A listed resource, or a resource template (its URI has `{…}` parts to fill in)."""
    if not hasattr(item, "uri_template"):
        return Resource(str(item.uri), _about(item))
    about = _about(item)
    text = f"{about} (a template: fill in the {{…}} parts)".lstrip()
    return Resource(str(item.uri_template), text)


def _about(resource: Listing | ResourceTemplate) -> str:
    about = resource.description or getattr(resource, "title", None) or resource.name or ""
    return about.strip().splitlines()[0][:100] if about.strip() else ""


def config_digest(entry: object) -> str | None:
    """A digest of a parsed config entry; None for an object (a transport or an in-process
    server), whose tools are never cached."""
    if not isinstance(entry, StdioServer | RemoteServer):
        return None
    data = {"kind": type(entry).__name__, **asdict(entry)}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class ToolCache:
    """The cache file of one profile; a missing or unreadable file is an empty cache."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, server: str, digest: str) -> Offer | None:
        """The offer cached for `server` under this config digest, if any."""
        return _cached_offer(self._read().get(server), digest)

    def put(self, server: str, digest: str, offer: Offer, configured: Collection[str]) -> None:
        """Remember what `server` offers, unless the file holds exactly that already; entries
        of servers no longer `configured` go when it is written."""
        stored = self._read()
        if _cached_offer(stored.get(server), digest) == offer:
            return
        servers = {k: v for k, v in stored.items() if k in configured and k != server}
        servers[server] = {"digest": digest, "offer": offer.to_json()}
        text = json.dumps({"format": FORMAT, "servers": servers}, ensure_ascii=False, indent=1)
        # Two processes writing at once: the last whole file wins; the other server's entry
        # is written again at its next connection.
        atomic_write(self.path, text + "\n")

    def _read(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError, RecursionError):
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("format") == FORMAT:
                servers = data.get("servers")
                return servers if isinstance(servers, dict) else {}
        return {}


def _cached_offer(entry: object, digest: str) -> Offer | None:
    """The offer of a cache entry, when it was made for this config digest and is whole."""
    if not isinstance(entry, dict) or entry.get("digest") != digest:
        return None
    try:
        return Offer.from_json(entry["offer"])
    except (KeyError, TypeError, ValueError):  # a damaged entry: connect and rewrite it
        return None
