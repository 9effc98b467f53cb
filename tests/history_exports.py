"""Exports of other assistants, shaped as the real ones are (fields, nesting, id styles).

ChatGPT's `conversations.json`: a list of conversations, each with a `mapping` tree of nodes
(`id`, `message`, `parent`, `children`) and a `current_node`; messages with `author.role`,
`content.content_type` and `parts`, `create_time` in Unix seconds (null on some), `weight`,
`recipient`, `metadata` (`is_visually_hidden_from_conversation`, `model_slug`,
`attachments`). Claude's: a list of conversations with `uuid`, `name`, ISO times and
`chat_messages` (`uuid`, `sender`, `text`, `content` blocks, `attachments`, `files`,
`parent_message_uuid`). Both as documented by public parsers of the real exports.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

T0 = 1_716_200_000.25  # 2024-05-20 10:13:20.250 UTC, in ChatGPT's float seconds


def gpt_message(
    mid: str,
    role: str,
    parts: list[Any],
    *,
    time: float | None,
    content_type: str = "text",
    recipient: str = "all",
    hidden: bool = False,
    weight: float = 1.0,
    **metadata: Any,
) -> dict[str, Any]:
    """One message as ChatGPT exports it."""
    if hidden:
        metadata["is_visually_hidden_from_conversation"] = True
    return {
        "id": mid,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": time,
        "update_time": None,
        "content": {"content_type": content_type, "parts": parts},
        "status": "finished_successfully",
        "end_turn": role == "assistant" or None,
        "weight": weight,
        "metadata": metadata,
        "recipient": recipient,
        "channel": None,
    }


def gpt_conversation(cid: str, title: str, nodes: list[tuple[str, str | None, Any]], current: str):
    """A conversation from (node id, parent id, message or None) triples."""
    mapping = {
        nid: {"id": nid, "message": message, "parent": parent, "children": []}
        for nid, parent, message in nodes
    }
    for nid, parent, _ in nodes:
        if parent is not None:
            mapping[parent]["children"].append(nid)
    times = [n[2]["create_time"] for n in nodes if n[2] and n[2]["create_time"]]
    return {
        "title": title,
        "create_time": min(times) - 1 if times else T0,
        "update_time": max(times) if times else T0,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": current,
        "plugin_ids": None,
        "conversation_id": cid,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": cid,
    }


def chatgpt_export() -> list[dict[str, Any]]:
    """Two conversations with what a real export holds besides what the user saw.

    The first: custom instructions (a hidden system message and a hidden user context), a
    question edited once (the old question and its answer stay as a branch), a code run
    (the assistant's call to the python tool and the tool's output), a reasoning model's
    thoughts and recap, an image the user sent, an answer without a time, and citations.
    """
    system = gpt_message("sys", "system", [""], time=None, weight=0.0, hidden=True)
    context = gpt_message(
        "ctx",
        "user",
        ["The user lives in Graz and keeps bees."],
        time=None,
        content_type="user_editable_context",
        hidden=True,
        is_user_system_message=True,
    )
    old_q = gpt_message("q1-old", "user", ["Which hive for a balcony?"], time=T0)
    old_a = gpt_message("a1-old", "assistant", ["A top-bar hive."], time=T0 + 5)
    new_q = gpt_message("q1", "user", ["Which beehive suits a small rooftop garden?"], time=T0 + 60)
    thoughts = gpt_message(
        "think",
        "assistant",
        [],
        time=T0 + 61,
        content_type="thoughts",
    )
    thoughts["content"]["thoughts"] = [{"summary": "Weighing", "content": "SECRET REASONING"}]
    recap = gpt_message("recap", "assistant", ["Thought for 4 seconds"], time=T0 + 62)
    recap["content"] = {"content_type": "reasoning_recap", "content": "Thought for 4 seconds"}
    call = gpt_message(
        "call",
        "assistant",
        ["print(12 * 3)"],
        time=T0 + 63,
        content_type="code",
        recipient="python",
    )
    output = gpt_message("out", "tool", ["36"], time=T0 + 64, content_type="execution_output")
    answer = gpt_message(
        "a1",
        "assistant",
        ["A Warré hive: light, and 36 frames fit.\ue200cite\ue202turn0search1\ue201"],
        time=None,  # no time: takes its neighbour's
        model_slug="gpt-4o",
    )
    photo = gpt_message(
        "q2",
        "user",
        [
            {
                "content_type": "image_asset_pointer",
                "asset_pointer": "file-service://file-AbC123",
                "size_bytes": 221373,
                "width": 708,
                "height": 1536,
                "fovea": None,
                "metadata": {"sanitized": True},
            },
            "Is this comb healthy?",
        ],
        time=T0 + 120,
        content_type="multimodal_text",
        attachments=[{"id": "file-AbC123", "name": "comb.jpg", "mimeType": "image/jpeg"}],
    )
    verdict = gpt_message("a2", "assistant", ["It looks healthy."], time=T0 + 125)
    first = gpt_conversation(
        "6650f1a2-aaaa-8000-9000-0123456789ab",
        "Rooftop beekeeping",
        [
            ("root", None, None),
            ("sys", "root", system),
            ("ctx", "sys", context),
            ("q1-old", "ctx", old_q),
            ("a1-old", "q1-old", old_a),
            ("q1", "ctx", new_q),
            ("think", "q1", thoughts),
            ("recap", "think", recap),
            ("call", "recap", call),
            ("out", "call", output),
            ("a1", "out", answer),
            ("q2", "a1", photo),
            ("a2", "q2", verdict),
        ],
        current="a2",
    )
    second = gpt_conversation(
        "6650f1a2-bbbb-8000-9000-0123456789ab",
        "Sourdough",
        [
            ("r2", None, None),
            (
                "s1",
                "r2",
                gpt_message(
                    "s1", "user", ["My sourdough starter is called Gerald."], time=T0 + 86_400
                ),
            ),
            (
                "s2",
                "s1",
                gpt_message("s2", "assistant", ["Gerald sounds lively!"], time=T0 + 86_410),
            ),
        ],
        current="s2",
    )
    return [first, second]


def claude_export() -> list[dict[str, Any]]:
    """A Claude conversation with thinking, a web search (tool use and result), an attached
    file, an edited question (its old branch kept), and a message without a time."""
    root = "00000000-0000-4000-8000-000000000000"

    def msg(uuid: str, sender: str, parent: str, created: str | None, content, text="", **kw):
        return {
            "uuid": uuid,
            "text": text,
            "content": content,
            "sender": sender,
            "created_at": created,
            "updated_at": created,
            "attachments": kw.get("attachments", []),
            "files": kw.get("files", []),
            "parent_message_uuid": parent,
        }

    def text(t: str, start: str) -> dict[str, Any]:
        return {
            "type": "text",
            "text": t,
            "start_timestamp": start,
            "stop_timestamp": start,
            "flags": None,
            "citations": [],
        }

    old = msg(
        "m1-old",
        "human",
        root,
        "2024-06-01T09:00:00.000000Z",
        [text("How far is it to Trieste?", "2024-06-01T09:00:00.000000Z")],
        "How far is it to Trieste?",
    )
    old_reply = msg(
        "m2-old",
        "assistant",
        "m1-old",
        "2024-06-01T09:00:04.000000Z",
        [text("About 150 km.", "2024-06-01T09:00:04.000000Z")],
        "About 150 km.",
    )
    question = msg(
        "m1",
        "human",
        root,
        "2024-06-01T09:02:00.123456Z",
        [text("How far is it by train from Ljubljana to Trieste?", "2024-06-01T09:02:00Z")],
        "How far is it by train from Ljubljana to Trieste?",
        attachments=[
            {
                "file_name": "itinerary.txt",
                "file_size": 120,
                "file_type": "txt",
                "extracted_content": "day 1: Ljubljana",
            }
        ],
    )
    reply = msg(
        "m2",
        "assistant",
        "m1",
        None,  # no time: takes its neighbour's
        [
            {
                "type": "thinking",
                "thinking": "PRIVATE THOUGHTS",
                "summaries": [],
                "start_timestamp": "2024-06-01T09:02:01Z",
                "stop_timestamp": "2024-06-01T09:02:02Z",
            },
            {
                "type": "tool_use",
                "name": "web_search",
                "input": {"query": "Ljubljana Trieste"},
                "start_timestamp": None,
                "stop_timestamp": None,
            },
            {
                "type": "tool_result",
                "name": "web_search",
                "content": [{"type": "knowledge", "title": "SEARCH RESULT PAGE", "url": "x"}],
                "is_error": False,
                "start_timestamp": None,
                "stop_timestamp": None,
            },
            text("The train takes about two and a half hours.", "2024-06-01T09:02:05Z"),
        ],
        "The train takes about two and a half hours.",
    )
    thanks = msg(
        "m3",
        "human",
        "m2",
        "2024-06-01T09:03:00.000000Z",
        [text("Thanks, I will book the 8:15.", "2024-06-01T09:03:00Z")],
        "Thanks, I will book the 8:15.",
        files=[{"file_name": "ticket.png"}],
    )
    return [
        {
            "uuid": "28a3c4e8-1f21-4b6f-9c1a-77d2e0c0aaaa",
            "name": "Train to Trieste",
            "created_at": "2024-06-01T08:59:58.000000Z",
            "updated_at": "2024-06-01T09:03:00.000000Z",
            "account": {"uuid": "acc-1"},
            "chat_messages": [old, old_reply, question, reply, thanks],
        },
        {
            "uuid": "28a3c4e8-1f21-4b6f-9c1a-77d2e0c0bbbb",
            "name": "Plain old export",
            "created_at": "2024-03-01T10:00:00Z",
            "updated_at": "2024-03-01T10:00:09Z",
            "account": {"uuid": "acc-1"},
            "chat_messages": [  # an older export: plain text, no content blocks, no parents
                {
                    "uuid": "p1",
                    "text": "My bike is a green Gazelle.",
                    "sender": "human",
                    "created_at": "2024-03-01T10:00:00Z",
                    "updated_at": "2024-03-01T10:00:00Z",
                    "attachments": [],
                    "files": [],
                },
                {
                    "uuid": "p2",
                    "text": "A classic Dutch bike!",
                    "sender": "assistant",
                    "created_at": "2024-03-01T10:00:09Z",
                    "updated_at": "2024-03-01T10:00:09Z",
                    "attachments": [],
                    "files": [],
                },
            ],
        },
    ]


def write_zip(path: Path, conversations: list[dict[str, Any]], *, folder: str = "") -> Path:
    """The export as downloaded: a zip with conversations.json among other files."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{folder}conversations.json", json.dumps(conversations))
        archive.writestr(f"{folder}user.json", json.dumps({"id": "user-1"}))
        archive.writestr(f"{folder}chat.html", "<html></html>")
    return path


def zip_bytes_without_conversations() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("user.json", "{}")
    return buffer.getvalue()
