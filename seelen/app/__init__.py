"""The composition root: builds the real objects from Settings, and closes them again.

The `cli/` commands turn into calls on an `App`; tests build the same `App` with a temporary
data dir and a local model server. Nothing is patched at module level.
- `core.py`: the App (what one process holds) and its lifecycle (start, close, index);
- `build.py`: `build_app`, each part built in order, closed again if a later step fails;
- `recall.py`: which embedding model a profile uses, and the recall parts built on it.
"""

from seelen.app.build import add_knowledge, build_app, build_tools, debug_logs, start_knowledge
from seelen.app.core import App, NotWriter, WriterLock
from seelen.app.recall import build_recall, embedding_provider, recall_tokens

__all__ = [
    "App",
    "NotWriter",
    "WriterLock",
    "add_knowledge",
    "build_app",
    "build_recall",
    "build_tools",
    "debug_logs",
    "embedding_provider",
    "recall_tokens",
    "start_knowledge",
]
