"""The embedders: the bundled ONNX model for real, and the OpenAI client over real HTTP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import heavy_imports
from model_server import ModelServer, embed_text

from seelen.errors import ConfigError, ModelError
from seelen.models import embed
from seelen.models.embed import (
    E5_HEAD_CHARS,
    LOCAL_DIM,
    TOKENIZER_PATH,
    E5Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    make_embedder,
)

CAT = "I adopted a cat named Miso"
SENTENCES = [
    CAT,
    "my pet cat is called Miso",
    "the stock market fell sharply today",
    "Wie geht es dir heute?",
]
# Cosine similarities of SENTENCES under the original fp32 model (sentence-transformers
# weights run in plain numpy), which the int8 ONNX model should reproduce closely.
REFERENCE_SIMILARITIES = [
    [1.000, 0.851, 0.021, 0.076],
    [0.851, 1.000, 0.074, 0.123],
    [0.021, 0.074, 1.000, 0.038],
    [0.076, 0.123, 0.038, 1.000],
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    """One loaded local model for the whole module (loading takes about a second)."""
    model = LocalEmbedder()
    model.embed(["warm up"])
    return model


def test_importing_embed_loads_no_heavy_library() -> None:
    """Start-up stays fast: onnxruntime, tokenizers and openai load on first use only."""
    assert heavy_imports("seelen.models.embed", ("onnxruntime", "tokenizers", "openai")) == []


def test_vectors_are_unit_length_float32(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), LOCAL_DIM) == (4, embedder.dim)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.model_id == "local:all-MiniLM-L6-v2-onnx-int8"


def test_similar_sentences_score_higher(embedder: LocalEmbedder) -> None:
    cat, pet, stocks, _ = embedder.embed(SENTENCES)
    assert float(cat @ pet) > 0.7
    assert float(cat @ stocks) < 0.3
    assert float(pet @ stocks) < 0.3


def test_matches_the_fp32_reference_model(embedder: LocalEmbedder) -> None:
    """Pooling, tokenizer and model agree with the original weights, not just roughly."""
    vectors = embedder.embed(SENTENCES)
    reference = np.array(REFERENCE_CAT_VECTOR, dtype=np.float32)
    assert float(vectors[0] @ reference) / float(np.linalg.norm(reference)) > 0.99
    assert np.allclose(vectors @ vectors.T, REFERENCE_SIMILARITIES, atol=0.02)


def test_a_text_has_the_same_vector_whatever_it_is_embedded_with(
    embedder: LocalEmbedder,
) -> None:
    """Texts run side by side on several threads; each keeps its place in the result, and
    its vector depends on nothing but the text (int8 runs would shift texts run together)."""
    texts = ["a much longer sentence about cats and dogs and birds", "hi", CAT, "", "two words"]
    singles = np.vstack([embedder.embed([t]) for t in texts])
    many = embedder.embed(texts * 4)
    assert np.array_equal(many, np.vstack([singles] * 4))
    assert np.isfinite(many).all()


def test_the_int8_rewrite_keeps_the_weights_and_changes_every_product(tmp_path: Path) -> None:
    """Each of the 36 int8-stored weight products runs in int8 (with its bias), the GELUs and
    NaN guards are fused away, and the result still matches the float32 run closely."""
    import onnx
    import onnxruntime as ort

    from seelen.models.embed import default_model_path
    from seelen.models.int8_graph import int8_model

    original = onnx.load(str(default_model_path()))
    data = int8_model(default_model_path())
    assert data is not None
    rewritten = onnx.load_from_string(data)
    ops = [n.op_type for n in rewritten.graph.node]
    assert ops.count("DynamicQuantizeMatMul") == 36 and ops.count("MatMul") == 12  # attention
    assert ops.count("Gelu") == 6 and "Erf" not in ops and "IsNaN" not in ops
    weights = {w.name: w.raw_data for w in original.graph.initializer if w.data_type == 3}
    kept = [w for w in rewritten.graph.initializer if w.name in weights]
    assert len(kept) == len(weights) and all(weights[w.name] == w.raw_data for w in kept)
    tokens = np.array([[101, 1045, 4233, 1037, 4937, 2315, 2771, 6499, 102]], dtype=np.int64)
    feed = {"input_ids": tokens, "attention_mask": tokens * 0 + 1, "token_type_ids": tokens * 0}
    plain, fast = (
        ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feed)[0][0].mean(0)
        for m in (str(default_model_path()), data)
    )
    assert float(plain @ fast) / float(np.linalg.norm(plain) * np.linalg.norm(fast)) > 0.98


def test_a_model_without_int8_products_is_loaded_as_it_is(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    from seelen.models.int8_graph import int8_model

    node = helper.make_node("Identity", ["x"], ["y"])
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node], "g", [value("x", TensorProto.FLOAT, [1])], [value("y", TensorProto.FLOAT, [1])]
    )
    path = tmp_path / "plain.onnx"
    onnx.save(helper.make_model(graph), str(path))
    assert int8_model(path) is None


def test_long_text_is_cut_at_256_tokens(embedder: LocalEmbedder) -> None:
    words = ["apple", "river", "music", "stone"] * 500  # one token each
    full, cut_254, cut_200 = embedder.embed(
        [" ".join(words), " ".join(words[:254]), " ".join(words[:200])]
    )
    assert np.allclose(full, cut_254, atol=1e-5)  # 254 words + [CLS] + [SEP] = 256 tokens
    assert not np.allclose(full, cut_200, atol=1e-3)  # so not cut at 128 or 200


def test_a_huge_text_keeps_the_same_vector_when_read_only_in_part(
    embedder: LocalEmbedder,
) -> None:
    words = ["apple", "river", "music", "stone"] * 100
    huge = " ".join(words) + " tail" * 200_000  # 1 MB: only its head is tokenized now
    spaced = "apple" + " " * 10_000 + " ".join(words)  # 10 KB of spaces hold no piece
    vectors = embedder.embed([huge, " ".join(words[:254]), spaced, " ".join(["apple", *words])])
    assert np.allclose(vectors[0], vectors[1], atol=1e-5)
    assert np.allclose(vectors[2], vectors[3], atol=1e-5)  # read past the spaces, as before


def test_the_multilingual_model_reads_a_long_text_up_to_its_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shorter head than the real one: the same cut, at a tenth of the embedding work
    # (a 4,096-character head is two 510-token windows, 2.4 s of CPU each time).
    monkeypatch.setattr(embed, "E5_HEAD_CHARS", E5_HEAD_CHARS // 16)
    head = ("the harbour of Lisbon at dawn " * 20)[: embed.E5_HEAD_CHARS]
    long = head + "stock markets crashed " * 5_000  # 110 KB: many windows if read whole
    whole, first = E5Embedder().embed([long, head])
    assert np.allclose(whole, first, atol=1e-5)


def test_empty_input(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]).shape == (0, LOCAL_DIM)
    with pytest.raises(TypeError):
        embedder.embed("not a list")


def test_shipped_tokenizer_is_uncased_bert_wordpiece() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    # [CLS] hello ! [SEP]: lower-cased WordPiece ids of bert-base-uncased
    assert tokenizer.encode("HeLLo!").ids[:4] == [101, 7592, 999, 102]
    assert tokenizer.get_vocab_size() == 30522


def test_missing_or_broken_model_is_a_model_error(tmp_path: Path) -> None:
    missing = LocalEmbedder(model_path=tmp_path / "nope.onnx")  # lazy: no error yet
    with pytest.raises(ModelError, match="missing"):
        missing.embed(["x"])
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="cannot load"):
        LocalEmbedder(model_path=broken).embed(["x"])
    with pytest.raises(ModelError, match="tokenizer"):
        LocalEmbedder(tokenizer_path=tmp_path / "none.json").embed(["x"])


# -- OpenAI-compatible endpoint (a real HTTP server; only its vectors are made up) ---------


def test_openai_embedder_over_http(model_server: ModelServer) -> None:
    emb = OpenAIEmbedder(model_server.url, "sk-test", "emb-model", batch_size=2)
    texts = ["the cat sat", "a dog ran", "", "cats and dogs", "the cat sat down"]
    vectors = emb.embed(texts)
    expected = np.array([embed_text(t if t else " ") for t in texts], dtype=np.float32)
    assert vectors.shape == (5, 16) and emb.dim == 16
    assert np.allclose(vectors, expected, atol=1e-6)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    bodies = [r for r in model_server.requests if "input" in r]
    assert [len(b["input"]) for b in bodies] == [2, 2, 1]  # batches of 2, order kept
    assert all(b["model"] == "emb-model" for b in bodies)
    assert all(text for b in bodies for text in b["input"])  # no empty strings sent
    assert emb.model_id == "openai:emb-model"


def test_openai_dim_is_probed_once_unless_known(model_server: ModelServer) -> None:
    emb = OpenAIEmbedder(model_server.url, "", "emb-model")
    assert emb.dim == 0  # reading it asks nothing: the probe is a call of its own
    assert not [r for r in model_server.requests if "input" in r]
    assert emb.probe_dim() == 16 and emb.probe_dim() == 16 and emb.dim == 16
    assert len([r for r in model_server.requests if "input" in r]) == 1
    known = OpenAIEmbedder(model_server.url, "", "text-embedding-3-small")
    assert known.dim == 1536 and known.probe_dim() == 1536
    assert len([r for r in model_server.requests if "input" in r]) == 1


def test_openai_failures_are_model_errors(model_server: ModelServer) -> None:
    wrong_path = OpenAIEmbedder(model_server.url + "/nowhere", "k", "emb", max_retries=0)
    with pytest.raises(ModelError, match="embedding request"):
        wrong_path.embed(["x"])
    model_server.close()  # nothing listens on the port any more
    gone = OpenAIEmbedder(model_server.url, "k", "emb", max_retries=0, timeout=2)
    with pytest.raises(ModelError, match="embedding request"):
        gone.embed(["x"])


def test_make_embedder() -> None:
    assert isinstance(make_embedder("local", "", "", ""), LocalEmbedder)
    remote = make_embedder("openai", "text-embedding-3-small", "http://127.0.0.1:9/v1", "k")
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model_id == "openai:text-embedding-3-small" and remote.dim == 1536
    with pytest.raises(ConfigError):
        make_embedder("openai", "", "http://127.0.0.1:9/v1", "k")
    with pytest.raises(ConfigError):
        make_embedder("cloud", "m", "", "")


# "I adopted a cat named Miso" under the fp32 sentence-transformers weights.
REFERENCE_CAT_VECTOR = [
    -0.01520,
    0.01530,
    0.04316,
    0.07358,
    -0.08485,
    -0.06792,
    0.04119,
    0.02803,
    -0.00659,
    0.00176,
    0.07466,
    -0.05771,
    -0.01792,
    0.04742,
    -0.01693,
    0.07545,
    0.01520,
    0.02591,
    0.03589,
    -0.00473,
    -0.04047,
    0.00157,
    -0.02752,
    -0.01327,
    -0.03088,
    0.03899,
    -0.04893,
    0.06633,
    -0.03073,
    -0.02187,
    -0.05932,
    -0.01637,
    0.04826,
    0.03618,
    0.01771,
    -0.03175,
    0.01377,
    0.00910,
    0.07733,
    0.02430,
    -0.01561,
    0.03485,
    0.06243,
    -0.04117,
    -0.04183,
    -0.01552,
    -0.02255,
    -0.00513,
    0.09102,
    -0.06812,
    -0.09548,
    -0.04512,
    0.00056,
    -0.00492,
    -0.04061,
    0.04727,
    0.07228,
    0.00800,
    -0.02400,
    -0.02343,
    -0.03835,
    0.02667,
    -0.02166,
    0.05827,
    -0.02241,
    0.00543,
    0.01726,
    -0.04193,
    0.07851,
    -0.00689,
    0.04868,
    0.00059,
    0.04749,
    0.05193,
    -0.06788,
    0.05275,
    0.08435,
    0.12876,
    0.01787,
    -0.04468,
    -0.03430,
    0.00974,
    -0.04744,
    -0.03199,
    0.03576,
    0.12053,
    -0.01743,
    0.01928,
    -0.06262,
    -0.02536,
    0.01149,
    -0.06799,
    0.03604,
    -0.03268,
    0.02860,
    -0.04320,
    0.04367,
    0.00660,
    -0.05651,
    0.07296,
    0.00985,
    0.00651,
    0.01927,
    0.07546,
    0.00632,
    -0.03062,
    0.00177,
    -0.01569,
    0.04663,
    0.03039,
    -0.01332,
    -0.03700,
    -0.02207,
    0.01653,
    0.02629,
    -0.04211,
    0.08470,
    -0.03197,
    -0.01150,
    -0.05250,
    0.03367,
    0.00373,
    -0.04892,
    0.00650,
    -0.05685,
    -0.08017,
    -0.02307,
    -0.00000,
    -0.01134,
    -0.00799,
    0.02075,
    0.08322,
    0.07673,
    0.02808,
    -0.02913,
    0.03632,
    -0.10392,
    -0.05910,
    -0.09454,
    -0.02641,
    -0.02580,
    -0.06982,
    -0.10281,
    0.04390,
    -0.03475,
    0.03568,
    0.03399,
    0.05381,
    -0.01313,
    -0.01530,
    0.04765,
    -0.02837,
    0.02215,
    0.01663,
    -0.06345,
    -0.16305,
    0.03431,
    -0.00953,
    0.03825,
    -0.04321,
    0.07624,
    0.02155,
    -0.11152,
    -0.07675,
    -0.00418,
    -0.09316,
    -0.03143,
    0.07851,
    0.11589,
    0.04467,
    0.00559,
    0.06048,
    0.01891,
    -0.04216,
    0.05542,
    -0.01941,
    0.08563,
    -0.04109,
    0.02059,
    -0.09697,
    -0.05173,
    -0.02606,
    -0.07478,
    -0.00614,
    0.00286,
    -0.01358,
    0.05381,
    0.03303,
    0.02455,
    0.00401,
    0.01456,
    0.01642,
    0.05317,
    -0.12827,
    0.03692,
    -0.01907,
    0.06724,
    -0.00533,
    -0.03602,
    -0.01730,
    -0.05357,
    -0.01574,
    -0.01691,
    -0.03714,
    0.01656,
    -0.02702,
    -0.04380,
    -0.03656,
    0.04029,
    0.01305,
    -0.02804,
    0.09545,
    -0.07778,
    0.06368,
    0.02510,
    -0.04473,
    -0.14508,
    0.04680,
    0.00144,
    0.08580,
    -0.03883,
    -0.09722,
    0.09168,
    0.00000,
    -0.02435,
    -0.07046,
    0.06802,
    -0.03561,
    -0.04672,
    -0.00915,
    0.02200,
    0.07420,
    0.06349,
    0.00936,
    0.02467,
    0.03287,
    0.11511,
    -0.06975,
    0.02060,
    0.04852,
    -0.04157,
    0.01898,
    0.07668,
    -0.08769,
    0.02055,
    0.09371,
    -0.11655,
    0.03365,
    0.02903,
    0.00454,
    0.03168,
    0.03892,
    -0.01169,
    -0.08129,
    -0.02134,
    -0.02331,
    -0.06777,
    0.01387,
    0.02328,
    0.02542,
    -0.07767,
    0.00756,
    -0.03834,
    -0.04008,
    -0.08620,
    0.06690,
    -0.02813,
    0.08057,
    0.02294,
    -0.00424,
    0.00251,
    0.03739,
    0.07000,
    0.02653,
    -0.01653,
    -0.08866,
    -0.09667,
    -0.02352,
    0.05323,
    0.00217,
    0.05043,
    -0.02329,
    -0.02782,
    0.04923,
    -0.03801,
    0.02096,
    -0.06793,
    0.04084,
    -0.04625,
    0.01342,
    -0.01411,
    -0.14142,
    -0.08237,
    -0.10324,
    0.08786,
    0.03184,
    -0.11029,
    -0.05692,
    -0.02082,
    0.01872,
    -0.03385,
    0.05365,
    -0.03046,
    0.00909,
    -0.01421,
    0.01939,
    0.00149,
    0.07602,
    0.02905,
    -0.04028,
    0.03908,
    0.03054,
    0.03498,
    -0.00681,
    0.05373,
    0.04446,
    0.06148,
    -0.08209,
    -0.01085,
    -0.00000,
    -0.01682,
    0.00486,
    -0.00265,
    -0.02097,
    0.01071,
    -0.00007,
    -0.01668,
    -0.05860,
    -0.02994,
    -0.02022,
    -0.00800,
    -0.05806,
    -0.00302,
    0.04826,
    0.12391,
    -0.02095,
    0.09409,
    0.06960,
    0.01988,
    0.09396,
    -0.06237,
    0.03606,
    -0.00132,
    -0.09295,
    0.04355,
    -0.07017,
    -0.00831,
    0.01118,
    0.01028,
    -0.05335,
    0.00976,
    0.01811,
    0.02492,
    0.06626,
    0.00180,
    -0.02194,
    -0.02835,
    -0.03446,
    0.04203,
    -0.01463,
    0.05399,
    -0.00653,
    0.08739,
    -0.04185,
    -0.11296,
    0.07844,
    0.02460,
    -0.07509,
    0.06877,
    0.01273,
    0.02355,
    0.08783,
    0.02967,
    0.01988,
    0.00319,
    -0.08913,
    0.04838,
    0.01879,
    0.04759,
    0.04823,
    0.06794,
    0.01469,
    -0.01757,
    0.04439,
]


def test_a_prepared_model_loads_without_rewriting_and_gives_the_same_vectors(
    prepared_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`prepare` keeps the rewritten, optimized model (install.sh runs it); a load uses it,
    with the same vectors, and passes a damaged copy over for the model file itself."""
    import shutil
    import stat

    from seelen.models import onnx_session

    model = embed.default_model_path()
    # Where `prepare` ran (conftest.py), an older prepared copy was: it is gone, and no
    # partial file is left.
    prepared_in = prepared_model.parent
    assert prepared_model == onnx_session.ready_file(model, prepared_in)
    assert [p.name for p in prepared_in.iterdir()] == [prepared_model.name]
    assert stat.S_IMODE(prepared_model.stat().st_mode) == 0o600
    loaded: list[Path] = []
    real = onnx_session._session

    def session(path: Path, *args: object, **kwargs: object) -> onnx_session.OnnxSession:
        loaded.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_session, "_session", session)
    plain = onnx_session.load_session(model, ready_in=tmp_path)  # nothing prepared yet
    ready = Path(shutil.copy2(prepared_model, tmp_path))  # this test's own, to damage
    loaded.clear()
    fast = onnx_session.load_session(model, ready_in=tmp_path)
    assert loaded == [ready]
    names = {i.name for i in plain.get_inputs()}
    ids = np.array([[101, 2026, 2905, 7906, 13734, 102]], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in names:
        feed["token_type_ids"] = np.zeros_like(ids)
    np.testing.assert_allclose(plain.run(None, feed)[0], fast.run(None, feed)[0], atol=1e-4)
    ready.write_bytes(b"not a model")
    loaded.clear()
    again = onnx_session.load_session(model, ready_in=tmp_path)
    assert loaded == [ready, model]
    np.testing.assert_allclose(plain.run(None, feed)[0], again.run(None, feed)[0], atol=1e-5)
