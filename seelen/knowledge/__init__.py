"""Knowledge folders: the user's notes, indexed incrementally and searched by question."""

from seelen.knowledge.files import NoteFilter
from seelen.knowledge.library import Knowledge
from seelen.knowledge.search import Passage, used_line

__all__ = ["Knowledge", "NoteFilter", "Passage", "used_line"]
