"""The prepared embedding model's leaner graph: fewer nodes, every vector the same to the bit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from seelen.models import embed, lean_graph, onnx_session
from seelen.models.embed import TOKENIZER_PATH

TEXTS = [
    "ok",
    "I adopted a cat named Miso",
    "We moved to Lisbon in March; my sister still lives in Porto and visits every summer. " * 8,
]


def _ops(path: Path) -> Counter[str]:
    import onnx

    return Counter(node.op_type for node in onnx.load(str(path)).graph.node)


def _vectors(path: Path) -> list[np.ndarray]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=embed.LOCAL_MAX_TOKENS)
    tokenizer.no_padding()
    ort = onnx_session._onnxruntime()
    session = onnx_session._session(path, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    out = []
    for text in TEXTS:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": ids * 0}
        out.append(session.run(None, feed)[0])
    return out


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model as onnxruntime optimizes it, before the lean rewrite."""
    path = tmp_path_factory.mktemp("optimized") / "model.onnx"
    ort = onnx_session._onnxruntime()
    model = embed.default_model_path()
    onnx_session._session(model, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, save=path)
    return path


def test_prepare_keeps_a_leaner_graph_with_the_same_vectors(
    optimized: Path, prepared_model: Path
) -> None:
    ready = prepared_model  # what `prepare` keeps (conftest.py)
    before, after = _ops(optimized), _ops(ready)
    assert sum(after.values()) < sum(before.values()) * 0.6
    # Query, key and value: one product a layer instead of three; the mask's Adds are gone.
    layers = before["Softmax"]
    assert after["DynamicQuantizeMatMul"] == before["DynamicQuantizeMatMul"] - 2 * layers
    assert after["Split"] == layers and after["Add"] == before["Add"] - layers
    assert after["GatherND"] == after["Where"] == 0  # the mask's own nodes
    # The heads read in place: one copy a layer left (the attention's result), no MatMul.
    assert after["Transpose"] == layers and after["MatMul"] == 0
    assert after["FusedMatMul"] == 2 * layers
    for old, new in zip(_vectors(optimized), _vectors(ready), strict=True):
        assert np.array_equal(old, new)


def test_a_lean_rewrite_that_changes_a_number_is_not_kept(
    optimized: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = lean_graph.lean

    def off_by_a_little(graph: object) -> int:
        from onnx import numpy_helper

        gone = real(graph)  # type: ignore[arg-type]
        bias = next(w for w in graph.initializer if w.name.endswith("_bias"))  # type: ignore[attr-defined]
        bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + 1e-3, bias.name))
        return gone

    monkeypatch.setattr(lean_graph, "lean", off_by_a_little)
    ready = onnx_session.prepare(embed.default_model_path(), tmp_path)
    assert _ops(ready) == _ops(optimized)  # the optimized graph, as it was
    assert [p.name for p in tmp_path.iterdir()] == [ready.name]  # no partial file left
