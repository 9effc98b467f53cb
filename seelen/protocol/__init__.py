"""The vocabulary of an open profile: one class per thing, shared by every front-end.

- `events`: what one turn yields (the agent's events, rendered by the chat and `ask`);
- `calls`: what a front-end asks (`Ask`, `Search`, `Remember`, …) and the owner's replies
  about itself;
- `results`: what the memory calls answer (`SearchResult`, `Remembered`, …);
- `codec`: those classes as JSON lines on the owner's socket, and back.

The chat, `ask`, `seelen mcp`, `memory search` and the Python API see the same classes,
whether the profile is open in their own process or in the owner's. Standard library only.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import cast

from seelen.protocol import calls, codec, events
from seelen.protocol.codec import Frame, Registry, to_json

__all__ = [
    "OWNER_REPLIES",
    "Frame",
    "calls",
    "codec",
    "decode_answer",
    "decode_request",
    "events",
    "results",
    "to_json",
]
OWNER_REPLIES: tuple[type[Frame], ...] = (calls.Refused, calls.OwnerStatus, calls.Stopping)
_REQUESTS = Registry("op", calls.REQUESTS)


def _results() -> tuple[type[Frame], ...]:
    from seelen.protocol.results import RESULTS

    return RESULTS


# The results are read the first time one arrives: `seelen ask` never needs them (a dozen
# classes, a few milliseconds of its start).
_ANSWERS = Registry("type", (*events.EVENTS, *OWNER_REPLIES), more=_results)


def decode_request(line: bytes) -> calls.Request:
    """A client's line as its request; ValueError when it is not one."""
    return cast(calls.Request, _REQUESTS.decode(line))


def decode_answer(line: bytes) -> Frame:
    """An owner's line as what it answers; ValueError when it is nothing it answers."""
    return _ANSWERS.decode(line)


def __getattr__(name: str) -> ModuleType:
    """`protocol.results`, imported when first used."""
    if name == "results":  # importing the submodule sets the attribute: no second call
        return importlib.import_module("seelen.protocol.results")
    raise AttributeError(name)
