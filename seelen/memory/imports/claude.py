"""Claude's data export: `conversations.json`, a list of conversations with `chat_messages`.

A message has a `sender` (`human` or `assistant`), ISO 8601 times, a plain `text` and, in
newer exports, `content` blocks: `text` blocks are what the chat showed; `thinking`,
`tool_use` and `tool_result` blocks are the model's reasoning and tool traffic and are left
out. Files the user attached are noted by name. Newer exports link each message to the one
before it (`parent_message_uuid`), and an edited message leaves its old branch in the list:
then only the path that ends at the conversation's current message (its
`current_leaf_message_uuid`, or else the newest message) is read.
"""

from __future__ import annotations

from typing import Any

from seelen.memory.imports.conversation import (
    Conversation,
    HistoryError,
    Message,
    iso_to_ms,
    joined,
    text_of,
)

SOURCE = "claude"
ROLES = {"human": "user", "assistant": "assistant"}


def looks_like(data: object) -> bool:
    """True when `data` (parsed JSON) has the shape of Claude's conversations.json."""
    items = _items(data)
    return bool(items) and _is_conversation(items[0])


def _items(data: object) -> list[Any]:
    # The export is a list; a few tools wrap it as {"conversations": [...]}.
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        return list(data["conversations"])
    return data if isinstance(data, list) else []


def _is_conversation(item: object) -> bool:
    return isinstance(item, dict) and isinstance(item.get("chat_messages"), list)


def read(data: object) -> list[Conversation]:
    """Every conversation of a parsed Claude conversations.json, as the user last saw it."""
    items = _items(data)
    if not items and data != []:
        raise HistoryError("not Claude's conversations.json (it holds no list of conversations)")
    return [conversation(item, n) for n, item in enumerate(items, start=1)]


def conversation(item: object, n: int) -> Conversation:
    """The `n`th conversation of the export, as the user last saw it."""
    if not isinstance(item, dict) or not _is_conversation(item):
        raise HistoryError(f"Claude export: conversation {n} has no chat_messages")
    key = item.get("uuid")
    if not isinstance(key, str) or not key:
        raise HistoryError(f"Claude export: conversation {n} has no uuid")
    chain = _current_branch(item, [m for m in item["chat_messages"] if isinstance(m, dict)])
    messages = [m for m in (_message(raw, k) for k, raw in enumerate(chain)) if m]
    return Conversation(
        SOURCE,
        key,
        text_of(item, "name"),
        tuple(messages),
        iso_to_ms(item.get("created_at")) or iso_to_ms(item.get("updated_at")),
    )


def _current_branch(item: dict[str, Any], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages on the path to the current one, oldest first; the list as it is when the
    export links no parents (older exports hold one branch)."""
    by_id = {m["uuid"]: m for m in messages if isinstance(m.get("uuid"), str)}
    if not messages or not any(m.get("parent_message_uuid") in by_id for m in messages):
        return messages
    leaf = item.get("current_leaf_message_uuid")
    node = by_id.get(leaf) if isinstance(leaf, str) else None
    if node is None:
        node = max(messages, key=lambda m: iso_to_ms(m.get("created_at")) or 0)
    path, seen = [], set()
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        parent = node.get("parent_message_uuid")
        node = by_id.get(parent) if isinstance(parent, str) else None
    return path[::-1]


def _message(raw: dict[str, Any], position: int) -> Message | None:
    role = ROLES.get(text_of(raw, "sender"))
    if role is None:
        return None
    text = joined([_shown_text(raw), *_files(raw)])
    if not text:
        return None
    return Message(
        text_of(raw, "uuid", f"#{position}"), role, text, iso_to_ms(raw.get("created_at"))
    )


def _shown_text(raw: dict[str, Any]) -> str:
    """The text blocks when the message has content blocks, else its plain `text`."""
    blocks = raw.get("content")
    if isinstance(blocks, list) and blocks:
        return joined([b["text"] for b in blocks if _is_text_block(b)])
    text = raw.get("text")
    return text if isinstance(text, str) else ""


def _is_text_block(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _files(raw: dict[str, Any]) -> list[str]:
    """Attached files and images by name (their contents were not part of the message)."""
    names: list[str] = []
    for key in ("attachments", "files"):
        for f in raw.get(key) or []:
            name = f.get("file_name") if isinstance(f, dict) else None
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return [f"[file: {name}]" for name in names]
