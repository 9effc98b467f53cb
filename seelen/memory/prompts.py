"""Prompt templates as pure functions. The current time is always an argument."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

QUOTE_OPEN, QUOTE_CLOSE = "<memory-quote>", "</memory-quote>"
# Only the tags themselves: the quoted words are part of what the assistant said.
_QUOTE_TAG = re.compile(re.escape(QUOTE_OPEN) + "|" + re.escape(QUOTE_CLOSE))
# Around what Seelen adds to the user's newest message (the time, what was recalled): the
# model must tell it from the user's words, and it is never stored as them.
CONTEXT_OPEN, CONTEXT_CLOSE = "<context>", "</context>"

RULES = f"""You are Seelen, a companion with a long-term memory of this user.
- Below are your persona and your picture of the user. The user's newest message begins
  with a {CONTEXT_OPEN} block that Seelen adds, not the user: the current time and memories
  recalled from earlier sessions, each with its date. Use them naturally when they matter;
  never invent memories.
- When you repeat an earlier memory word for word, wrap the quoted words in
  {QUOTE_OPEN}…{QUOTE_CLOSE}.
- Facts can change over time: the newest dated memory wins over an older one.
- Answer in the user's language. Use Markdown when it helps."""

# For small local models (a context of a few thousand tokens): fewer, plainer rules. A 135M
# model copies tags such as <memory-quote> literally and rambles unless told to be brief.
COMPACT_RULES = f"""You are Seelen, a friendly companion who remembers this user.
Reply in one to three short sentences, in the user's language.
Seelen's notes come in {CONTEXT_OPEN} before the user's message. Use them when they matter;
never invent memories."""


@dataclass(frozen=True)
class DatedText:
    """A recalled text with its time (or time range) already formatted for the prompt."""

    when: str
    text: str
    role: str = ""


@dataclass(frozen=True)
class DatedPassage:
    """Turns of one past session for the prompt: a heading with the session's date, then its
    turns in conversation order; None stands where turns were left out."""

    heading: str
    turns: Sequence[DatedText | None]


# One line of a recalled passage; recall prices its budget with these same lines.
GAP_LINE = "- …"


def passage_heading(day: datetime) -> str:
    """The line above a session's recalled turns: its date and weekday."""
    return f"### {day:%Y-%m-%d, %A}"


def passage_line(when: str, role: str, text: str) -> str:
    """One recalled turn as the prompt shows it."""
    return f"- [{when}] {role}: {text}"


def _passage_block(passage: DatedPassage) -> str:
    lines = [passage.heading]
    for t in passage.turns:
        lines.append(GAP_LINE if t is None else passage_line(t.when, t.role, t.text))
    return "\n".join(lines)


def strip_quotes(text: str) -> str:
    """Remove the `<memory-quote>` tags, keeping every word between and around them."""
    return _QUOTE_TAG.sub("", text)


def system_prompt(
    *, persona: str, profile: str, session_summary: str, compact: bool = False
) -> str:
    """The system message: what stays the same from one question to the next (so a model
    server's prompt cache keeps it), in the design's order; empty parts are left out.

    `compact` uses `COMPACT_RULES`, for small models with a small context."""
    parts = [
        COMPACT_RULES if compact else RULES,
        _section("Your persona", persona),
        _section("What you know about the user", profile),
        _section("Earlier in this session (summary)", session_summary),
    ]
    return "\n\n".join(p for p in parts if p)


def context_block(
    *,
    related_summaries: Sequence[DatedText],
    related_passages: Sequence[DatedPassage],
    now: datetime,
    notes: Sequence[tuple[str, str]] = (),
) -> str:
    """What changes with every question, for the start of the user's newest message: the
    current time and what was recalled for it, between `CONTEXT_OPEN` and `CONTEXT_CLOSE`."""
    parts = [f"## Current time\n{now.strftime('%A, %Y-%m-%d %H:%M %Z').strip()}"]
    if related_summaries:
        body = "\n".join(f"- [{s.when}] {s.text}" for s in related_summaries)
        parts.append(_section("Related past sessions", body))
    if related_passages:
        body = "\n".join(_passage_block(p) for p in related_passages)
        parts.append(_section("Related past conversations (excerpts, by session)", body))
    if notes:
        body = "\n\n".join(f"[{label}]\n{text}" for label, text in notes)
        parts.append(_section("From the user's notes (their knowledge folders)", body))
    body = "\n\n".join(p for p in parts if p)
    return f"{CONTEXT_OPEN}\n{body}\n{CONTEXT_CLOSE}"


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip()}" if body.strip() else ""


def transcript(lines: Sequence[tuple[str, str, str]]) -> str:
    """(when, role, text) lines as a plain transcript for the tool model."""
    return "\n".join(f"[{when}] {role}: {text}" for when, role, text in lines)


def fold_messages(previous: str, lines: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Ask the tool model to fold the oldest turns into the rolling session summary."""
    task = (
        "Update the running summary of this conversation with the new turns below. Keep every "
        "fact about the user, decisions, open questions and the assistant's promises, with "
        "dates where given. Write plain prose, at most 200 words. Reply with the summary only."
    )
    body = f"Summary so far:\n{previous or '(none yet)'}\n\nNew turns:\n{transcript(lines)}"
    return [{"role": "system", "content": task}, {"role": "user", "content": body}]


def session_summary_messages(
    rolling: str, lines: Sequence[tuple[str, str, str]]
) -> list[dict[str, str]]:
    """Ask the tool model for the final summary of a whole session."""
    task = (
        "Summarise this finished conversation for long-term memory. Keep facts about the user "
        "(names, preferences, plans, feelings), what was decided, and anything to follow up, "
        "with dates. Plain prose, at most 250 words. Reply with the summary only."
    )
    earlier = f"Summary of the earlier part:\n{rolling}\n\n" if rolling else ""
    body = f"{earlier}Conversation:\n{transcript(lines)}"
    return [{"role": "system", "content": task}, {"role": "user", "content": body}]


def profile_update_messages(profile: str, summary: str, max_words: int) -> list[dict[str, str]]:
    """Ask the tool model to merge a session summary into the user profile."""
    task = (
        "You maintain a profile of the user: stable facts, preferences, relationships, goals. "
        "Merge the new session summary into the profile. Replace facts that changed, keep the "
        f"rest, drop trivia. At most {max_words} words, short lines. Reply with the profile only."
    )
    body = f"Current profile:\n{profile.strip() or '(empty)'}\n\nNew session summary:\n{summary}"
    return [{"role": "system", "content": task}, {"role": "user", "content": body}]


def persona_update_messages(persona: str, summary: str, max_words: int) -> list[dict[str, str]]:
    """Ask the tool model to let the assistant's persona grow from a session."""
    task = (
        "You maintain the self-image of an assistant named Seelen, written in the first "
        "person. Update it only where the session below shows something lasting about how "
        "Seelen should be with this user (tone, shared history, promises). Keep its core. "
        f"At most {max_words} words. Reply with the persona text only."
    )
    body = f"Current persona:\n{persona.strip()}\n\nSession summary:\n{summary}"
    return [{"role": "system", "content": task}, {"role": "user", "content": body}]
