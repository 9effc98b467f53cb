"""onnxruntime sessions for the local embedding model: loaded once per process, shared.

Loading one costs 0.2-0.4 s of CPU, and onnxruntime runs one session from several threads
at once, so every `LocalEmbedder` of a process (a script that opens the Python API several
times, the tests) uses the same session for the same file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from seelen.errors import ModelError
from seelen.heap import give_back, limit_arenas


class Named(Protocol):
    name: str


class OnnxSession(Protocol):
    """What is used of an onnxruntime `InferenceSession` (the package ships no types)."""

    def run(self, outputs: None, feed: dict[str, np.ndarray]) -> list[np.ndarray]: ...
    def get_inputs(self) -> list[Named]: ...
    def get_outputs(self) -> list[Named]: ...


_sessions: dict[Path, OnnxSession] = {}
_sessions_lock = threading.Lock()


def shared_session(path: Path) -> OnnxSession:
    """The process's session for the model file at `path`, loaded on first use."""
    key = path.resolve()
    with _sessions_lock:
        if key not in _sessions:
            _sessions[key] = load_session(key)
        return _sessions[key]


def forget_session(path: Path) -> None:
    """Drop the process's session for `path` (runs under way keep theirs until they end);
    the next `shared_session` loads it again."""
    with _sessions_lock:
        _sessions.pop(path.resolve(), None)


def load_session(path: Path) -> OnnxSession:
    """An onnxruntime CPU session for the model at `path` (its int8-stored products computed
    in int8, see `int8_graph`), one thread per run: the batches of a large call run side by
    side instead (see LocalEmbedder). A question alone was no slower on one thread: 33-36 ms
    median against 40-46 ms on two, at a load of 16-18."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ModelError("onnxruntime is missing: reinstall Seelen") from None
    if not path.is_file():
        raise ModelError(f"local embedding model missing: {path}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # warnings about unused initialisers are noise to users
    # Idle threads sleep instead of spinning: the local chat model shares these two cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    limit_arenas()  # before onnxruntime starts its threads
    try:
        model = _int8(path)
        session: OnnxSession = ort.InferenceSession(
            model or str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # a corrupt or foreign file
        raise ModelError(f"cannot load the local embedding model {path}: {exc}") from exc
    del model
    give_back()  # the graph read and rewritten: 30 MB freed but kept by malloc
    names = {i.name for i in session.get_inputs()}
    if not {"input_ids", "attention_mask"} <= names or len(session.get_outputs()) != 1:
        raise ModelError(f"{path} is not a sentence-embedding model (inputs: {sorted(names)})")
    return session


def _int8(path: Path) -> bytes | None:
    try:
        import onnx  # noqa: F401  (what int8_graph rewrites with)
    except ImportError:
        raise ModelError("the 'onnx' package is missing: reinstall Seelen") from None
    from seelen.models.int8_graph import int8_model

    return int8_model(path)
