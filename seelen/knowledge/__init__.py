"""Knowledge folders: the user's notes, indexed incrementally and searched by question."""

from seelen.knowledge.files import NoteFilter
from seelen.knowledge.library import Knowledge

__all__ = ["Knowledge", "NoteFilter"]
