"""ChatGPT's "Export data": `conversations.json`, a list of conversations.

Each conversation's `mapping` is a tree of nodes (`id`, `message`, `parent`, `children`): an
edited message or a regenerated answer leaves its old branch in the tree, and what the user
saw last is the path from `current_node` up to the root. Only that path is read, and of it
only what the chat showed: the user's and the assistant's `text` and `multimodal_text`
messages. Left out: hidden system messages (custom instructions), messages marked hidden,
tool calls (an assistant message addressed to a tool), tool output (browsing, code runs),
and the reasoning of thinking models (`thoughts`, `reasoning_recap`).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from seelen.memory.imports.conversation import (
    Conversation,
    HistoryError,
    Message,
    joined,
    seconds_to_ms,
    text_of,
)

SOURCE = "chatgpt"
SHOWN_TYPES = ("text", "multimodal_text")
# Citation markers of web answers (private-use characters around "cite", "turn0search3"…):
# the chat drew them as small links, so the stored text leaves them out.
_CITATION = re.compile("\ue200[^\ue201]*\ue201")


def looks_like(data: object) -> bool:
    """True when `data` (parsed JSON) has the shape of ChatGPT's conversations.json."""
    return isinstance(data, list) and bool(data) and _is_conversation(data[0])


def _is_conversation(item: object) -> bool:
    """A conversation: its message tree, or the id ChatGPT gives each (one whose tree is
    missing or null is a conversation with no messages, not a different kind of file)."""
    if not isinstance(item, dict):
        return False
    tree = item.get("mapping")
    return isinstance(tree, dict) or (tree is None and "conversation_id" in item)


def read(data: object) -> list[Conversation]:
    """Every conversation of a parsed conversations.json, as the user last saw it."""
    if not isinstance(data, list):
        raise HistoryError("not ChatGPT's conversations.json (it holds no list of conversations)")
    return [conversation(item, n) for n, item in enumerate(data, start=1)]


def conversation(item: object, n: int) -> Conversation:
    """The `n`th conversation: the messages on the path from `current_node` to the root."""
    if not isinstance(item, dict) or not isinstance(item.get("mapping") or {}, dict):
        raise HistoryError(f"ChatGPT export: conversation {n} has no message tree (mapping)")
    key = item.get("conversation_id") or item.get("id")
    if not isinstance(key, str) or not key:
        raise HistoryError(f"ChatGPT export: conversation {n} has no id")
    # No tree (missing, or null): nothing to import from it, and no reason to refuse the
    # export's other conversations (the import used to stop at it, importing none).
    mapping: dict[str, Any] = item.get("mapping") or {}
    messages, last_time = [], None
    for node in _path(item, mapping):
        message = _message(node, mapping[node])
        if message is not None:
            # A message without a time came right after the node before it (a tool's
            # output, the reasoning), which is closer than the previous message shown.
            messages.append(message if message.ts_ms else replace(message, ts_ms=last_time))
        last_time = seconds_to_ms(_time_of(mapping[node])) or last_time
    return Conversation(
        SOURCE,
        key,
        text_of(item, "title"),
        tuple(messages),
        seconds_to_ms(item.get("create_time")) or seconds_to_ms(item.get("update_time")),
    )


def _path(item: dict[str, Any], mapping: dict[str, Any]) -> list[str]:
    """Node ids from the root down to `current_node` (a cycle or a missing parent ends it)."""
    node = item.get("current_node")
    if not isinstance(node, str) or node not in mapping:
        node = _newest_leaf(mapping)
    path: list[str] = []
    seen: set[str] = set()
    while isinstance(node, str) and node in mapping and node not in seen:
        seen.add(node)
        path.append(node)
        parent = mapping[node].get("parent") if isinstance(mapping[node], dict) else None
        node = parent
    return path[::-1]


def _newest_leaf(mapping: dict[str, Any]) -> str | None:
    """Without a usable `current_node` (old exports): the leaf written last."""
    leaves = [
        (_time_of(node), key)
        for key, node in mapping.items()
        if isinstance(node, dict) and not node.get("children")
    ]
    return max(leaves)[1] if leaves else None


def _time_of(node: object) -> float:
    message = node.get("message") if isinstance(node, dict) else None
    value = message.get("create_time") if isinstance(message, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _message(node_id: str, node: object) -> Message | None:
    """The node's message as the user saw it, or None when the chat did not show it."""
    message = node.get("message") if isinstance(node, dict) else None
    if not isinstance(message, dict) or not _shown(message):
        return None
    parts = message["content"].get("parts")
    pieces = [_part(p) for p in parts] if isinstance(parts, list) else []
    text = joined(pieces + _attachments(message))
    text = _CITATION.sub("", text).strip()
    if not text:
        return None
    role = message["author"]["role"]
    metadata = message.get("metadata") or {}
    model = metadata.get("model_slug") if isinstance(metadata, dict) else None
    meta = {"model": model} if role == "assistant" and isinstance(model, str) else {}
    return Message(
        text_of(message, "id", node_id), role, text, seconds_to_ms(message.get("create_time")), meta
    )


def _shown(message: dict[str, Any]) -> bool:
    """Whether the chat showed this message: a user's or the assistant's words, not hidden,
    not addressed to a tool, not reasoning or tool traffic."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role not in ("user", "assistant"):
        return False  # system (custom instructions, context) and tool output
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        return False
    if message.get("recipient") not in ("all", None):
        return False  # the assistant calling a tool (code, browsing, image generation)
    if message.get("weight") == 0:
        return False  # what the chat hid: an unselected regeneration, context
    content = message.get("content")
    return isinstance(content, dict) and content.get("content_type") in SHOWN_TYPES


def _part(part: object) -> str:
    """One part of a message: its text, or a short placeholder for an image or other media."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str):  # e.g. the transcript of a voice message
        return text_of(part, "text")
    kind = part.get("content_type")
    if isinstance(kind, str) and kind.endswith("_asset_pointer"):
        return f"[{kind.removesuffix('_asset_pointer').removeprefix('real_time_user_')}]"
    return ""


def _attachments(message: dict[str, Any]) -> list[str]:
    """Files the user attached, by name (their contents were not part of the message)."""
    metadata = message.get("metadata")
    files = metadata.get("attachments") if isinstance(metadata, dict) else None
    if not isinstance(files, list):
        return []
    names = [f.get("name") for f in files if isinstance(f, dict)]
    return [f"[file: {name}]" for name in names if isinstance(name, str) and name]
