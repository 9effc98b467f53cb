"""Seelen: a terminal chatbot with layered long-term memory."""

__version__ = "0.1.0"

import logging as _logging

# A library's records go nowhere unless DEBUG_MODE attaches a file (seelen.logs): never to
# stderr, where they would land in the middle of the chat.
_logging.getLogger("seelen").addHandler(_logging.NullHandler())
