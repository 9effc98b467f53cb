"""onnxruntime sessions for the local embedding model: loaded once per process, shared.

Loading one costs 0.2-0.4 s of CPU, and onnxruntime runs one session from several threads
at once, so every `LocalEmbedder` of a process (a script that opens the Python API several
times, the tests) uses the same session for the same file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from seelen.errors import ModelError
from seelen.files import private_dir
from seelen.heap import give_back, limit_arenas
from seelen.models.per_file import PerFile


class Named(Protocol):
    name: str


class OnnxSession(Protocol):
    """What is used of an onnxruntime `InferenceSession` (the package ships no types)."""

    def run(self, outputs: None, feed: dict[str, np.ndarray]) -> list[np.ndarray]: ...
    def get_inputs(self) -> list[Named]: ...
    def get_outputs(self) -> list[Named]: ...


# Where `prepare` keeps models ready to load: beside the installed packages (the venv's
# share/), written when Seelen is installed, never with the user's data.
READY_DIR = Path(sys.prefix) / "share" / "seelen"
# Texts `prepare` checks the leaner graph with: a short chat line, a typical answer, the
# longest text the model keeps (LocalEmbedder cuts at 256 word pieces).
PROBE_LENGTHS = (3, 40, 256)


def shared_session(path: Path) -> OnnxSession:
    """The process's session for the model file at `path`, loaded on first use."""
    return _sessions.get(path)


def forget_session(path: Path) -> None:
    """Drop the process's session for `path` (runs under way keep theirs until they end);
    the next `shared_session` loads it again."""
    _sessions.forget(path)


def load_session(path: Path, ready_in: Path | None = None) -> OnnxSession:
    """An onnxruntime CPU session for the model at `path` (its int8-stored products computed
    in int8, see `int8_graph`), one thread per run: the batches of a large call run side by
    side instead (see LocalEmbedder). A question alone was no slower on one thread: 33-36 ms
    median against 40-46 ms on two, at a load of 16-18.

    Loaded from the copy `prepare` left in `ready_in` (default READY_DIR) when there is one
    for this file, this onnxruntime and this CPU; from the file itself otherwise."""
    ort = _onnxruntime()
    if not path.is_file():
        raise ModelError(f"local embedding model missing: {path}")
    ready = ready_file(path, ready_in or READY_DIR)
    if ready.is_file():
        try:  # optimized already: nothing left for onnxruntime to do at load
            return _checked(path, _session(ready, ort.GraphOptimizationLevel.ORT_DISABLE_ALL))
        except (ModelError, OSError, RuntimeError):  # damaged, or not what it was
            pass
    return _checked(path, _session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL))


def prepare(path: Path, ready_in: Path | None = None) -> Path:
    """Rewrite and optimize the model at `path` once, as every load would, and keep the result
    in `ready_in` (default READY_DIR) for `load_session`; returns the file (written whole, or
    not at all). install.sh runs it for the bundled model (`python -m seelen.models.prepare`).

    Why: a load that rewrites the graph (0.10 s of CPU, after importing onnx: 0.04) and lets
    onnxruntime optimize it (0.16) cost 0.29 s in every process that embeds; from the copy,
    0.07 s. Same vectors (largest difference 1.4e-6). The copy holds graph rewrites made for
    this CPU (onnxruntime says so), hence its name carries the CPU's flags. The optimized
    graph is then made leaner (`lean_graph`: 7-10% less CPU per text, the same vectors to the
    bit), if its check passes (`_lean`)."""
    ort = _onnxruntime()
    ready = ready_file(path, ready_in or READY_DIR)
    private_dir(ready.parent)
    partial = ready.with_name(f".{ready.name}.{os.getpid()}")
    leaner = partial.with_name(partial.name + ".lean")
    try:
        _checked(path, _session(path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, save=partial))
        if _lean(partial, leaner):
            os.replace(leaner, partial)
        os.chmod(partial, 0o600)
        os.replace(partial, ready)
    finally:
        partial.unlink(missing_ok=True)
        leaner.unlink(missing_ok=True)
    for stale in ready.parent.glob(f"{path.stem}.*.onnx"):  # for an older onnxruntime, say
        if stale != ready:
            stale.unlink(missing_ok=True)
    return ready


def _lean(optimized: Path, leaner: Path) -> bool:
    """Write to `leaner` the model at `optimized` with fewer nodes (`lean_graph`); True only
    if it was written and gives exactly the same numbers on probe texts of several lengths,
    up to the model's longest (all of them, every position attended: see `lean_graph`)."""
    import onnx

    from seelen.models.lean_graph import lean

    model = onnx.load(str(optimized))
    if not lean(model.graph):
        return False
    onnx.save(model, str(leaner))
    level = _onnxruntime().GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        before, after = _session(optimized, level), _session(leaner, level)
    except ModelError:  # a rewrite this onnxruntime cannot load: the optimized graph stays
        return False
    names = [i.name for i in before.get_inputs()]
    for length in PROBE_LENGTHS:
        ids = np.arange(length, dtype=np.int64) * 7919 % 28000 + 1000
        ids[0], ids[-1] = 101, 102  # [CLS] … [SEP], as every tokenized text
        feed = one_text(ids.tolist(), names)
        if not np.array_equal(before.run(None, feed)[0], after.run(None, feed)[0]):
            return False
    return True


def one_text(pieces: list[int], names: list[str]) -> dict[str, np.ndarray]:
    """The inputs `names` of a model run on one tokenized text alone: never padded, so every
    position is attended (what `lean_graph`'s prepared copy relies on)."""
    ids = np.array([pieces], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": ids * 0}
    return {name: feed[name] for name in names}


# The steps `prepare` applies: 1 = int8 rewrite and onnxruntime's optimization, 2 = and
# `lean_graph`, 3 = with its heads read in place. Raised whenever they change, so that a copy
# made by older steps is replaced (the vectors stay the same bits: `_lean` checks).
RECIPE = 3


def ready_file(path: Path, ready_in: Path) -> Path:
    """Where `prepare` keeps the model at `path`: named for the file (its path, size and
    time), onnxruntime's version, the CPU's flags and `RECIPE`, so a change of any misses
    it (and the next install prepares it again)."""
    ort = _onnxruntime()
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{ort.__version__}|{_cpu_flags()}"
    key += f"|{RECIPE}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return ready_in / f"{path.stem}.{digest}.onnx"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return platform.processor() or platform.machine()


def _onnxruntime() -> Any:  # Any: the package ships no types
    try:
        import onnxruntime as ort
    except ImportError:
        raise ModelError("onnxruntime is missing: reinstall Seelen") from None
    return ort


def _session(
    path: Path,
    level: Any,  # Any: an onnxruntime GraphOptimizationLevel (the package ships no types)
    save: Path | None = None,
) -> OnnxSession:
    """A session for the file at `path`, optimized at `level`; the optimized graph written to
    `save` if given."""
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = level
    options.log_severity_level = 3  # warnings about unused initialisers are noise to users
    if save is not None:
        options.optimized_model_filepath = str(save)
    # Idle threads sleep instead of spinning: the local chat model shares these two cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    limit_arenas()  # before onnxruntime starts its threads
    try:
        model = None if level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL else _int8(path)
        session: OnnxSession = ort.InferenceSession(
            model or str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # a corrupt or foreign file
        raise ModelError(f"cannot load the local embedding model {path}: {exc}") from exc
    del model
    give_back()  # the graph read and rewritten: 30 MB freed but kept by malloc
    return session


def _checked(path: Path, session: OnnxSession) -> OnnxSession:
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


_sessions: PerFile[OnnxSession] = PerFile(load_session)
