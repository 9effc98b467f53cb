"""Packages whose `__init__` is run only when something uses a name it defines.

Two libraries Seelen needs load, at import, large generated modules that Seelen never uses:
LanceDB loads a REST client that a local database never calls, and openai loads the types of
every API it offers (evals, graders, responses...) where Seelen uses chat completions and
embeddings. `defer_init` registers such a package unexecuted: its subpackages and modules
still import (Python reads only the package's `__path__` for them), and the first use of any
other name runs the real `__init__`. So nothing can break, and at worst it is slow again:
tests fail loudly if a release starts running a deferred `__init__` (tests/test_vectors.py
for LanceDB's, tests/test_deferred.py for openai's).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import importlib.abc

# `lance_namespace_urllib3_client`: 0.7-1.2 s of `import lancedb`'s 1.6-2.3 s (`python -X
# importtime`). `openai.types` and `openai.types.responses`: 0.23-0.28 s of the 0.45-0.50 s
# that importing openai takes; a warm owner's CPU from its start to its first two answers
# went from 1.42-1.85 s to 1.15-1.42 s (three runs each, alternated, load 4.2-4.6).
LANCEDB_REST_CLIENT = "lance_namespace_urllib3_client"
# `lancedb` itself: its `__init__` imports, by name, the cloud client (`lancedb.remote.db`),
# namespaces, catalogs and views, none of which a local folder uses; `lancedb.db` opens one
# alone. Its submodules import one name from it, `__version__`, given beforehand (the value
# its `__init__` sets). A process opening an index, adding a row and searching it: 0.52-0.82 s
# (median 0.57) of CPU -> 0.46-0.62 s (median 0.50), six runs each, alternated, load 3.0-3.2.
LANCEDB = "lancedb"
OPENAI_TYPES = ("openai.types", "openai.types.responses")

_lock = threading.RLock()


def defer_init(package: str, known: Mapping[str, object] | None = None) -> None:
    """Register `package` (top-level or dotted) so that its `__init__` runs at first use of
    a name it defines, not at import. Does nothing if it is imported already, missing, or no
    longer a package; never imports its parent. A parent not imported yet must import it by
    name in its own `__init__` (as openai's does its `types`), or it is not its attribute.
    `known`: names set on the package at once, with the values its `__init__` gives them
    (for its own submodules, which import them while it is still deferred)."""
    with _lock:
        if package in sys.modules:
            return
        spec = _spec(package)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not spec.submodule_search_locations:
            return
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(known or {})
        module.__dict__["__getattr__"] = _first_use(module, loader)
        sys.modules[package] = module
        parent, _, child = package.rpartition(".")
        if parent in sys.modules:  # as an import would; else the parent's `__init__` must
            setattr(sys.modules[parent], child, module)


def _spec(package: str) -> importlib.machinery.ModuleSpec | None:
    """Where `package` is, found from its parent's path without running the parent."""
    parent, _, _ = package.rpartition(".")
    if not parent:
        return importlib.machinery.PathFinder.find_spec(package)
    if parent in sys.modules:
        path = getattr(sys.modules[parent], "__path__", None)
    else:
        found = _spec(parent)
        path = found.submodule_search_locations if found is not None else None
    return importlib.machinery.PathFinder.find_spec(package, path) if path else None


def _first_use(module: ModuleType, loader: importlib.abc.Loader) -> Callable[[str], object]:
    """The module's `__getattr__`: a submodule is imported alone; any other name runs the
    real `__init__` once (under the lock, so two threads never run it twice)."""
    name = module.__name__

    def load_on_first_use(attr: str) -> Any:  # Any: a module attribute, of any kind
        if attr.startswith("__"):
            raise AttributeError(attr)
        if importlib.machinery.PathFinder.find_spec(f"{name}.{attr}", module.__path__):
            return importlib.import_module(f"{name}.{attr}")
        with _lock:
            if "__getattr__" in module.__dict__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        return getattr(module, attr)

    return load_on_first_use
