"""Which embedding model a profile uses, and the recall parts built on it."""

from __future__ import annotations

from pathlib import Path

from seelen.config import Settings
from seelen.memory.clock import Clock
from seelen.memory.indexer import Indexer
from seelen.memory.recall import Recall
from seelen.models.provider import DEFAULT_CONTEXT_TOKENS, Provider, planned_prompt_budget
from seelen.store import Store


def build_recall(
    settings: Settings, provider: Provider, store: Store, directory: Path, *, read_only: bool
) -> tuple[Indexer | None, Recall]:
    """The embedder, the LanceDB index, the recall pipeline and, for a writer, the
    background indexer."""
    from seelen.models.embed import OpenAIEmbedder, make_embedder
    from seelen.vectors import VectorIndex

    embedder = make_embedder(
        embedding_provider(settings, store, directory / "lancedb"),
        settings.embedding_model,
        provider.base_url or settings.openai_base_url,
        provider.api_key or settings.openai_api_key,
    )
    if isinstance(embedder, OpenAIEmbedder):
        embedder.probe_dim()  # an endpoint model of unknown size: one request, here
    index = VectorIndex(directory / "lancedb", embedder.model_id, embedder.dim, read_only=read_only)
    indexer = None if read_only else Indexer(store, index, embedder)
    recall = Recall(
        store,
        index,
        embedder,
        session_num=settings.recall_session_num,
        conv_num=settings.recall_conv_num,
        token_budget=recall_tokens(settings, planned_prompt_budget(settings)),
        clock=Clock(settings.timezone),
    )
    return indexer, recall


def embedding_provider(settings: Settings, store: Store, vectors: Path) -> str:
    """EMBEDDING_PROVIDER, with `auto` resolved for this profile: the multilingual model once
    it made the stored vectors or the user writes in a language other than English (see
    languages.py), else the fast English one. Never back: a switch costs a re-index."""
    if settings.embedding_provider != "auto":
        return settings.embedding_provider
    from seelen.models.embed import E5Embedder
    from seelen.models.languages import SAMPLE_CHARS, SAMPLE_TURNS, needs_multilingual
    from seelen.vectors.meta import META_FILE, ModelRecord

    if (ModelRecord(vectors / META_FILE).read() or {}).get("model_id") == E5Embedder.model_id:
        return "multilingual"
    texts = store.recent_user_texts(SAMPLE_TURNS, SAMPLE_CHARS)
    return "multilingual" if needs_multilingual(texts) else "local"


def recall_tokens(settings: Settings, context_tokens: int = 0) -> int:
    """RECALL_TOKENS, or by default 1,500 within a fifth of the prompt budget (of
    `context_tokens`, else CONTEXT_TOKENS or an endpoint's default; memory/context.py)."""
    from seelen.memory.context import recall_budget

    budget = context_tokens or settings.context_tokens or DEFAULT_CONTEXT_TOKENS
    return settings.recall_tokens or recall_budget(budget)
