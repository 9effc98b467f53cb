"""What the user is told when something of theirs does not fit the prompt whole.

The prompt builder clips silently (the model sees a cut marked "…"); without these notices a
user would not know that the model saw only part of a long persona, profile or message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seelen.memory.context import SHARES, exceeds, users_words
from seelen.memory.persona import PERSONA, PROFILE, PersonaFiles


def oversized_files(files: PersonaFiles, context_tokens: int, told: set[str]) -> list[str]:
    """The persona or profile that does not fit its share of the prompt, each said once
    (`told` remembers which were): only its beginning is used."""
    out = []
    for name, text, command in (
        (PERSONA, files.persona, "persona"),
        (PROFILE, files.profile, "profile"),
    ):
        tokens = int(context_tokens * SHARES[command])
        if name in told or not exceeds(text, tokens):
            continue
        told.add(name)
        out.append(
            f"{name} is too large to use whole ({len(text):,} characters; the prompt has room "
            f"for about {tokens:,} tokens of it): only its beginning is used. Shorten it with "
            f"`seelen {command} edit`, or go back with `seelen {command} restore 1`"
        )
    return out


def clipped_question(question: str, messages: Sequence[dict[str, Any]]) -> str:
    """What to say when the user's message was too long for the prompt ('' if it fit): the
    model sees its beginning and end only, though every character is stored."""
    sent = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = sent.get("content") if sent is not None else None
    if not isinstance(content, str):
        return ""
    content = users_words(content)  # without the recalled context put before them
    if len(content) >= len(question):
        return ""
    return (
        f"your message ({len(question):,} characters) is too long for the prompt: the model "
        f"sees its beginning and its end ({len(content):,} characters); it is stored whole"
    )
