"""Prompt assembly under a token budget, so a huge memory never overflows the context.

Token counts are estimated offline (no tokenizer download): about four characters a token
for alphabetic scripts, one token a character for CJK. That errs on the generous side for
English, which is the safe side for a budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from seelen.memory.clock import Clock
from seelen.memory.prompts import (
    CONTEXT_CLOSE,
    CONTEXT_OPEN,
    DatedPassage,
    DatedText,
    context_block,
    passage_heading,
    system_prompt,
)
from seelen.store import Turn

if TYPE_CHECKING:
    from seelen.memory.recalled import Passage

# Characters counted as one token each (CJK and beyond), as `ord(ch) >= 0x2E80`.
_WIDE = re.compile("[\u2e80-\U0010ffff]")

# Shares of the whole budget per part; the live turns get what the others leave.
SHARES = {
    "persona": 0.10,
    "profile": 0.10,
    "summary": 0.10,
    "related_sessions": 0.12,
    # The most recalled passages may take by default (RECALL_TOKENS=0): see RECALL_TOKENS.
    "related_turns": 0.20,
    "knowledge": 0.15,  # passages of the user's notes: about five chunks at 8,000 tokens
}


# The default budget of recalled passages (RECALL_TOKENS=0), within the share above: where
# the share of recalled evidence in the prompt stops growing. R@prompt at 1,000 / 1,500 /
# 2,000 tokens: synthetic .81 / .86 / .87 (bench_recall.py), MemoryBank English
# .944 / .965 / .970 (bench_memorybank.py); published memory layers put ~1,800-3,900 in.
RECALL_TOKENS = 1500


def recall_budget(context_tokens: int) -> int:
    """The default token budget of recalled passages for a prompt of `context_tokens`."""
    return min(RECALL_TOKENS, int(context_tokens * SHARES["related_turns"]))


def estimate_tokens(text: str) -> int:
    """A fast, offline estimate of a text's token count."""
    wide = len(_WIDE.findall(text))  # a C-speed count: pasted megabytes are estimated too
    return (len(text) - wide) // 4 + wide + 1


def exceeds(text: str, tokens: int) -> bool:
    """Whether `text` is estimated at more than `tokens` tokens. A text longer than 4 * tokens
    characters does (every character costs at least a quarter token), so a 50 MB file is not
    estimated whole on every turn (0.9 s)."""
    return len(text) > 4 * tokens + 4 or estimate_tokens(text) > tokens


def clip(text: str, tokens: int) -> str:
    """Cut `text` to about `tokens` tokens, marking the cut."""
    if not exceeds(text, tokens):
        return text
    return text[: _fitting_length(text, tokens)].rstrip() + " …"


def one_line(text: str, limit: int = 160) -> str:
    """`text` folded onto one line of at most `limit` characters, marking a cut with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _fitting_length(text: str, tokens: int, *, from_end: bool = False) -> int:
    """How many characters of `text` (from its start, or its end) fit in `tokens`."""
    # Every character costs at least a quarter token, so no more than 4 * tokens + 4 fit:
    # the search never has to estimate a pasted megabyte as a whole.
    lo, hi = 0, min(len(text), 4 * tokens + 4)
    while lo < hi:  # binary search on length: the estimate is monotonic
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[len(text) - mid :] if from_end else text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def clip_middle(text: str, tokens: int) -> str:
    """Cut `text` to about `tokens` tokens by leaving out its middle, saying how much went.

    A pasted document usually ends with the question about it, so both ends are kept.
    """
    if estimate_tokens(text) <= tokens:
        return text
    half = max(tokens // 2 - 16, 1)  # 16 tokens for the note itself
    head = _fitting_length(text, half)
    tail = _fitting_length(text[head:], half, from_end=True)
    left_out = len(text) - head - tail
    note = f"\n[… {left_out:,} characters left out of this prompt to fit the context …]\n"
    return text[:head] + note + text[len(text) - tail :]


def _fit_items(items: Sequence[DatedText], tokens: int) -> list[DatedText]:
    """Keep items in their rank order while they fit the budget."""
    kept, used = [], 0
    for item in items:
        cost = estimate_tokens(item.text) + 12
        if used + cost > tokens:
            continue
        kept.append(item)
        used += cost
    return kept


def dated_passages(passages: Sequence[Passage], clock: Clock) -> list[DatedPassage]:
    """Recalled passages as the prompt shows them: the session's date above its turns, each
    turn with its time (and its date, when a session ran past midnight)."""
    out = []
    for passage in passages:
        day = clock.at(passage.start_ms)
        turns: list[DatedText | None] = []
        for turn, gap in zip(passage.turns, passage.gaps, strict=True):
            if gap:
                turns.append(None)
            at = clock.at(turn.start_ms)
            when = at.strftime("%H:%M") if at.date() == day.date() else clock.fmt(turn.start_ms)
            turns.append(DatedText(when, turn.text, turn.role))
        out.append(DatedPassage(passage_heading(day), turns))
    return out


@dataclass(frozen=True)
class PromptParts:
    persona: str
    profile: str
    session_summary: str
    related_summaries: Sequence[DatedText]
    related_passages: Sequence[DatedPassage]  # already fitted to RECALL_TOKENS by recall
    live: Sequence[Turn]
    now: datetime
    notes: Sequence[tuple[str, str]] = ()  # (file › heading, passage), already fitted
    # Tokens kept for recalled passages and notes whatever a question brings (their budgets),
    # so the live turns shown do not move with what one question recalled.
    room: int = 0


# A prompt budget this small means a small local model (the bundled one gets 4,096 tokens of
# context minus its reply cap): it gets the compact rules. Endpoints default to 8,000.
COMPACT_BUDGET = 4096

# When the live turns outgrow their budget, the oldest go until the rest fill at most this
# share of it. The window's start then stays put for the next several questions, so the
# prompt up to the newest turn is the one sent last time and a model server takes it from
# its cache; moving the start one turn a question would have the whole window evaluated anew
# every time. The model still sees at least half its live budget of the newest turns.
LIVE_REFILL = 0.5

# The current time and the context block's tags, in every prompt.
_BLOCK_TOKENS = 32


def build_messages(parts: PromptParts, budget: int, *, apart: bool = False) -> list[dict[str, Any]]:
    """The prompt within `budget` tokens: the system message, the live turns, and at the start
    of the newest user message the context block (the time, what was recalled for it); with
    `apart`, the block is a system message of its own just before that message.

    Everything before that message is `prefix_messages`: it does not change from one question
    to the next, so a model server's prompt cache (llama.cpp's, an endpoint's) reuses it.
    """
    summaries = _fit_items(parts.related_summaries, int(budget * SHARES["related_sessions"]))
    block = context_block(
        related_summaries=summaries,
        related_passages=parts.related_passages,
        now=parts.now,
        notes=parts.notes,
    )
    return with_context(prefix_messages(parts, budget, estimate_tokens(block)), block, apart=apart)


def prefix_messages(parts: PromptParts, budget: int, block_tokens: int = 0) -> list[dict[str, Any]]:
    """The system message and the live turns, as the next question's prompt begins.

    The live turns get what the system message and the room kept for the context block
    leave (more only if a block, `block_tokens`, outgrew that room: RECALL_TOKENS set high).
    """
    system = system_prompt(
        persona=clip(parts.persona, int(budget * SHARES["persona"])),
        profile=clip(parts.profile, int(budget * SHARES["profile"])),
        session_summary=clip(parts.session_summary, int(budget * SHARES["summary"])),
        compact=budget <= COMPACT_BUDGET,
    )
    kept = int(budget * SHARES["related_sessions"]) + parts.room + _BLOCK_TOKENS
    left = budget - estimate_tokens(system) - max(kept, block_tokens)
    return [{"role": "system", "content": system}, *live_messages(parts.live, left)]


def with_context(
    messages: list[dict[str, Any]], block: str, *, apart: bool = False
) -> list[dict[str, Any]]:
    """`messages` with `block` at the start of the newest user message (only in the prompt:
    the stored turn keeps the user's words), or with `apart` in a system message just before
    it. Some chat templates refuse a system message after the first, so only a model whose
    template is known to take one gets `apart` (the bundled SmolLM2, whose 135M model copied
    the block's headings into its answers when they opened the user's message); with no user
    message at all, the block ends the system message."""
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        if out[index]["role"] == "user" and isinstance(out[index].get("content"), str):
            if apart:
                out.insert(index, {"role": "system", "content": block})
            else:
                out[index] = {**out[index], "content": f"{block}\n\n{out[index]['content']}"}
            return out
    if out and out[0]["role"] == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{block}"}
    return out


def users_words(content: str) -> str:
    """A prompt's user message without the context block `with_context` put before it."""
    if content.startswith(CONTEXT_OPEN) and (end := content.find(CONTEXT_CLOSE + "\n\n")) >= 0:
        return content[end + len(CONTEXT_CLOSE) + 2 :]
    return content


def live_messages(turns: Sequence[Turn], budget: int) -> list[dict[str, Any]]:
    """The live turns that fit, as chat messages, from a start that moves only in steps
    (`LIVE_REFILL`); the newest one is always kept."""
    turns = list(turns)
    # A cut-off reply at the very end is being answered again (/retry): the model must not
    # take it for its own finished answer.
    while turns and turns[-1].role == "assistant" and turns[-1].meta.get("interrupted"):
        turns.pop()
    messages = [turn_message(turn) for turn in turns]
    costs = [estimate_tokens(json.dumps(m, ensure_ascii=False)) + 4 for m in messages]
    picked = messages[window_start(costs, budget) :]
    newest = picked[-1] if picked else None
    if newest is not None and costs[-1] > budget and isinstance(newest.get("content"), str):
        # Only the prompt is clipped: the stored turn keeps every character.
        newest["content"] = clip_middle(newest["content"], max(budget - 64, 64))
    # A tool result whose assistant call was cut would be rejected by the API.
    while picked and picked[0]["role"] == "tool":
        picked.pop(0)
    return _answer_open_calls(picked)


def window_start(costs: Sequence[int], budget: int) -> int:
    """Where the live window starts, for turns costing `costs` (oldest first) in `budget`.

    Decided turn by turn from the oldest, so a prompt with one more turn starts where the
    previous one did unless that turn overflows the budget; then the start jumps to where the
    turns fill `LIVE_REFILL` of it. The newest turn is always in.
    """
    start = used = 0
    for index, cost in enumerate(costs):
        used += cost
        if used > budget:
            while start < index and used > budget * LIVE_REFILL:
                used -= costs[start]
                start += 1
    return start


def _answer_open_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every tool call a result: a crash or Ctrl-C mid-tool leaves calls unanswered,
    and the API rejects a history with an open call, which would wedge the session."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    out: list[dict[str, Any]] = []
    for message in messages:
        out.append(message)
        for call in message.get("tool_calls") or ():
            if call["id"] not in answered:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": "error: this tool call was interrupted",
                    }
                )
    return out


def turn_message(turn: Turn) -> dict[str, Any]:
    """One stored turn as an OpenAI chat message (tool calls and results included)."""
    if turn.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": turn.meta.get("tool_call_id", ""),
            "content": turn.text,
        }
    calls = turn.meta.get("tool_calls")
    if turn.role == "assistant" and calls:
        return {
            "role": "assistant",
            "content": turn.text or None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls
            ],
        }
    return {"role": turn.role, "content": turn.text}


# Images sent in one request: the newest 8. Hosted APIs take many more (Anthropic's 100);
# a local vision model (llama.cpp) encodes each image for seconds, so a handful is the
# useful amount for one answer.
MAX_IMAGES = 8


def with_images(
    messages: list[dict[str, Any]], images: Mapping[str, Sequence[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """`messages` with the images of tool results (by tool call id) shown to the model.

    The OpenAI chat format allows no images in `tool` messages, so each round's images follow
    its results as one `user` message of `image_url` parts, each named by its call.
    """
    budget = MAX_IMAGES
    out: list[dict[str, Any]] = []
    for index in range(len(messages) - 1, -1, -1):  # newest first, so the cap keeps them
        message = messages[index]
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message["role"] == "tool" and (following is None or following["role"] != "tool"):
            parts, budget = _round_images(messages, index, images, budget)
            if parts:
                out.append({"role": "user", "content": parts})
        out.append(message)
    out.reverse()
    return out


def _round_images(
    messages: list[dict[str, Any]],
    last: int,
    images: Mapping[str, Sequence[dict[str, Any]]],
    budget: int,
) -> tuple[list[dict[str, Any]], int]:
    """The content parts for the images of the tool results ending at `messages[last]`."""
    first = last
    while first > 0 and messages[first - 1]["role"] == "tool":
        first -= 1
    parts: list[dict[str, Any]] = []
    for message in messages[first : last + 1]:
        call_id = message.get("tool_call_id", "")
        shown = list(images.get(call_id, ()))[:budget]
        if shown:
            label = f"Images from the result of tool call {call_id}:"
            parts.append({"type": "text", "text": label})
            parts.extend(shown)
            budget -= len(shown)
    return parts, budget
