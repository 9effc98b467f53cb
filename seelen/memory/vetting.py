"""Checks on what the tool model writes before it becomes memory, and on what it is sent.

Every answer that would become a summary, the persona or the profile goes through `vet`: the
model's reasoning is removed, and an empty or looping answer is refused, so the caller keeps
the previous good version. Inputs are bounded the other way round by `oversized_input`.
"""

from __future__ import annotations

import re
import zlib

# `<think>…</think>` blocks of reasoning models (DeepSeek-R1, QwQ, Qwen3); an unclosed block
# at the start means the answer was cut while the model was still thinking.
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^\s*<think>", re.IGNORECASE)
_UNIT = re.compile(r"(?<=[.!?。！？])\s+|\n+")

# A loop repeats its sentences: with at least MIN_UNITS sentences or lines, fewer than
# UNIQUE_SHARE of them distinct is a loop. 0.7 keeps the earlier profile check's threshold.
MIN_UNITS, UNIQUE_SHARE = 4, 0.7
# Looping text compresses far better than prose. Measured with zlib level 9: the shipped
# persona 0.63, a README paragraph 0.51, a 250-word summary 0.69; a sentence repeated 30
# times 0.06, one repeated 20 times after a real start 0.12, 8 repeated lines 0.18. Below
# 0.2 is refused, only for texts long enough (200 chars) for the ratio to mean something.
MIN_COMPRESSION, COMPRESSION_MIN_CHARS = 0.2, 200
# What the tool model may be sent as a persona or profile: ten times the 6,000 characters
# it may write (MAX_FILE_CHARS), so a hand-edited file has room, a pasted book does not.
MAX_INPUT_CHARS = 60_000


def strip_reasoning(text: str) -> str:
    """The answer without `<think>` blocks; '' when the answer is all unfinished thinking."""
    text = _THINK.sub("", text)
    if _OPEN_THINK.match(text):
        return ""
    return text.strip()


def refusal(text: str) -> str | None:
    """Why `text` must not become memory ('empty', 'repeats itself'), or None if it may."""
    if not text.strip():
        return "empty"
    units = [u.strip() for u in _UNIT.split(text) if u.strip()]
    if len(units) >= MIN_UNITS and len(set(units)) / len(units) < UNIQUE_SHARE:
        return "repeats itself"
    data = text.encode("utf-8")
    if len(data) >= COMPRESSION_MIN_CHARS and len(zlib.compress(data, 9)) / len(data) < (
        MIN_COMPRESSION
    ):
        return "repeats itself"
    return None


def vet(text: str) -> tuple[str, str | None]:
    """(cleaned answer, reason it is refused or None): reasoning removed, loops refused."""
    cleaned = strip_reasoning(text)
    return cleaned, refusal(cleaned)


def oversized_input(name: str, text: str) -> str | None:
    """A clear message when a memory file is too big or not text to send to the tool model."""
    if len(text) > MAX_INPUT_CHARS:
        return (
            f"{name} is {len(text):,} characters, over the {MAX_INPUT_CHARS:,} the tool model "
            f"is sent; it was not updated (shorten it with `seelen persona|profile edit`)"
        )
    if "\x00" in text or "\ufffd" in text:
        return f"{name} is not plain UTF-8 text; it was not updated (check the file)"
    return None
