"""Trustworthy memory: what the user said survives faults, bad input and the model's mistakes."""

from __future__ import annotations

from pathlib import Path

from model_server import ModelServer
from test_memory import open_app, say, scripted

from seelen.prompts import QUOTE_CLOSE, QUOTE_OPEN, strip_quotes


def test_strip_quotes_removes_only_the_tags() -> None:
    text = f"You said {QUOTE_OPEN}I love ramen{QUOTE_CLOSE} — still true?"
    assert strip_quotes(text) == "You said I love ramen — still true?"
    assert strip_quotes("no tags here\n  kept as is ") == "no tags here\n  kept as is "


async def test_archive_keeps_quoted_words_and_never_touches_user_turns(
    env: ModelServer, data_dir: Path
) -> None:
    user_text = f"Remember: {QUOTE_OPEN}I love ramen{QUOTE_CLOSE}"
    env.responder = scripted(
        {
            "summary": "The user loves ramen.",
            "profile": "Likes ramen",
            "persona": "I am Seelen.",
            "chat": f"You told me {QUOTE_OPEN}I love ramen{QUOTE_CLOSE}, noted.",
        }
    )
    app = await open_app()
    await say(app, user_text)
    sid = app.sessions.current.session_id
    await app.sessions.archive()
    turns = {t.role: t.text for t in app.store.turns(sid)}
    assert turns["user"] == user_text  # the user's words, byte for byte
    assert turns["assistant"] == "You told me I love ramen, noted."
    await app.aclose()
