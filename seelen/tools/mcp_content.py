"""What MCP servers send back, as Seelen passes it on: tool names, results, resources,
progress and log notifications. Nothing here imports fastmcp.

What the model sees of non-text content: an image (from a tool or a resource) becomes the
line "[image: image/png, 4,035 bytes]" in the tool's text, and the image itself travels in
`ToolText.images` as an OpenAI `image_url` content part (a data URL), for a front-end to
show and for a model that accepts images; audio and binary resources are described by
type and size.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from seelen.logs import base64_size

if TYPE_CHECKING:  # the SDK's types only: importing them at run time costs start-up
    from mcp.types import CallToolResult, ContentBlock, Tool

MAX_NAME = 64
INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
# Server log levels (RFC 5424 names, as MCP sends them) as Python logging levels.
LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
NOTE_FORMAT = "%(asctime)s %(levelname)s server log: %(message)s"
NOTE_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ server log: ")


class ToolText(str):
    """A tool's text result, carrying the images it contained as OpenAI content parts."""

    images: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, text: str, images: Iterable[dict[str, Any]] = ()) -> ToolText:
        """Text plus image parts (`{"type": "image_url", "image_url": {"url": "data:…"}}`)."""
        result = cls(text)
        result.images = tuple(images)
        return result


def exposed_names(server: str, tools: list[str], taken: Collection[str] = ()) -> dict[str, str]:
    """Map each tool's own name to `<server>_<tool>`, valid and unique for OpenAI.

    Characters outside [A-Za-z0-9_-] become "_". A name that is too long, that two tools
    sanitise to, or that is already taken gets a short hash of (server, tool) instead of its
    tail, so it is the same on every run.
    """
    prefix = INVALID_NAME_CHARS.sub("_", server) or "_"
    tools = list(dict.fromkeys(tools))
    base = {t: f"{prefix}_{INVALID_NAME_CHARS.sub('_', t) or '_'}" for t in tools}
    counts = Counter(base.values())
    used = set(taken)
    names: dict[str, str] = {}
    for tool in tools:
        name, salt = base[tool], 0
        while len(name) > MAX_NAME or counts[base[tool]] > 1 or name in used:
            digest = hashlib.sha1(f"{server}\0{tool}\0{salt}".encode()).hexdigest()[:8]
            name, salt = f"{base[tool][: MAX_NAME - 9]}_{digest}", salt + 1
            if name not in used:
                break
        names[tool] = name
        used.add(name)
    return names


def needs_tasks(tool: Tool) -> bool:
    """Whether a listed tool can only run as a task (`taskSupport: "required"`), which Seelen
    does not do: such a tool is not offered to the model."""
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def render_result(result: CallToolResult) -> ToolText:
    """The text of an MCP tool result (text blocks joined, other content described), with
    its images as content parts."""
    images: list[dict[str, Any]] = []
    parts = [_render_block(block, images) for block in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return ToolText.of("\n".join(parts), images)


def render_resource(contents: Iterable[Any]) -> ToolText:
    """The contents of a read resource: text as it is, images as parts, other bytes described."""
    images: list[dict[str, Any]] = []
    parts = []
    for item in contents:
        text = getattr(item, "text", None)
        mime = getattr(item, "mime_type", None) or "application/octet-stream"
        if text is not None:
            parts.append(text)
        else:
            parts.append(_binary(str(item.uri), mime, item.blob or "", images))
    return ToolText.of("\n".join(parts), images)


def _render_block(block: ContentBlock, images: list[dict[str, Any]]) -> str:
    if block.type == "text":
        return block.text
    if block.type == "image":
        return _binary("", block.mime_type, block.data or "", images)
    if block.type == "audio":
        return f"[audio: {block.mime_type}, {base64_size(block.data or ''):,} bytes]"
    if block.type == "resource_link":
        return f"[resource link: {block.name} <{block.uri}>]"
    if block.type == "resource":
        resource = block.resource
        text: str | None = getattr(resource, "text", None)
        if text is not None:
            return text
        mime = getattr(resource, "mime_type", None) or "application/octet-stream"
        return _binary(str(resource.uri), mime, getattr(resource, "blob", "") or "", images)
    kind = getattr(block, "type", "")  # a kind of content newer than the SDK's types
    return f"[{kind or type(block).__name__} content]"


def _binary(uri: str, mime: str, data: str, images: list[dict[str, Any]]) -> str:
    """One line for base64 `data`; an image is also kept as an `image_url` part."""
    where = f" {uri}" if uri else ""
    if mime.startswith("image/"):
        images.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}})
        return f"[image{where}: {mime}, {base64_size(data):,} bytes]"
    return f"[binary{where}: {mime}, {base64_size(data):,} bytes]"


def resource_catalogue(resources: Sequence[Any], limit: int = 30) -> str:
    """The resources a server offers (each with `uri` and `about`), one per line, for the
    read tool's description."""
    lines = [f"- {r.uri}" + (f": {r.about}" if r.about else "") for r in resources[:limit]]
    if len(resources) > limit:
        lines.append(f"- … and {len(resources) - limit} more")
    return "\n".join(lines)
