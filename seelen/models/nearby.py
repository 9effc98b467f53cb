"""OpenAI-compatible servers the user may already run on this machine (Ollama, LM Studio,
llama.cpp's server): found on their usual ports, so that a chat on the small bundled model
can say, once, how to use one instead.

The probe never slows a start: it runs in a thread, asks each address at once, and gives
up on all of them within `PROBE_SECONDS`. It asks `GET /v1/models` (the models the server
offers) and counts only an answer shaped as the OpenAI API's.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from seelen.config import Settings
from seelen.counts import counted
from seelen.files import atomic_write

# A server on this machine answers in a few milliseconds (a refused port at once): a tenth
# of a second for all of them together is ample, and goes unseen beside a chat's start.
PROBE_SECONDS = 0.1
# Models named in the hint; a server with more says how many more.
SHOWN_MODELS = 5
# In the profile: the addresses already told about, one a line ("say it once").
TOLD_FILE = "local_servers_told"


@dataclass(frozen=True)
class KnownServer:
    """A kind of server and the address it listens on when installed as usual."""

    name: str
    base_url: str  # ends in /v1, as OPENAI_BASE_URL takes it


USUAL_SERVERS = (
    KnownServer("Ollama", "http://127.0.0.1:11434/v1"),
    KnownServer("LM Studio", "http://127.0.0.1:1234/v1"),
    KnownServer("llama.cpp's server", "http://127.0.0.1:8080/v1"),
)


@dataclass(frozen=True)
class FoundServer:
    """A server that answered, with the models it offers."""

    server: KnownServer
    models: tuple[str, ...]


def offers_nearby(settings: Settings) -> bool:
    """Whether the chat would run on the bundled model because no endpoint is configured
    (LLM_PROVIDER=local is the user's own choice: nothing to suggest then)."""
    return (
        settings.llm_provider == "auto"
        and not settings.openai_base_url
        and not settings.openai_api_key
    )


def models_at(base_url: str, timeout: float) -> tuple[str, ...] | None:
    """The model ids an OpenAI-compatible server at `base_url` lists; None when nothing
    answers there in `timeout` seconds, or something that is not such a server."""
    import urllib.request

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with direct.open(f"{base_url}/models", timeout=timeout) as response:
            listing = json.loads(response.read(1_000_000))
        models = listing["data"]
        return tuple(str(m["id"]) for m in models if isinstance(m, dict) and "id" in m)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def probe(servers: Sequence[KnownServer], timeout: float = PROBE_SECONDS) -> list[FoundServer]:
    """Ask every server at once; those that answered within `timeout` seconds, in order."""
    answers: dict[KnownServer, tuple[str, ...] | None] = {}

    def ask(server: KnownServer) -> None:
        answers[server] = models_at(server.base_url, timeout)

    threads = [threading.Thread(target=ask, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [FoundServer(s, m) for s in servers if (m := answers.get(s)) is not None]


def describe(found: FoundServer) -> str:
    """What to say of one server: where it answers, its models, and the settings to use it."""
    server, models = found.server, found.models
    listed = ", ".join(models[:SHOWN_MODELS])
    if len(models) > SHOWN_MODELS:
        listed += f" and {len(models) - SHOWN_MODELS} more"
    offers = f"offers {counted(len(models), 'model')}: {listed}" if models else "lists no model"
    model = models[0] if models else "NAME"
    return (
        f"{server.name} answers at {server.base_url} and {offers}. To chat with it instead "
        f"of the small bundled model: OPENAI_BASE_URL={server.base_url} CHAT_MODEL={model} "
        "(in .env or the environment; OPENAI_API_KEY only if the server asks for one)."
    )


class NearbyServers:
    """Probes the usual addresses in the background and tells of each server found once
    per profile (remembered in `TOLD_FILE`)."""

    def __init__(
        self,
        profile_dir: Path,
        servers: Sequence[KnownServer] = USUAL_SERVERS,
        timeout: float = PROBE_SECONDS,
    ) -> None:
        self.told_file = Path(profile_dir) / TOLD_FILE
        self.servers, self.timeout = tuple(servers), timeout
        self.found: Future[list[FoundServer]] = Future()

    def start(self) -> None:
        """Probe in a thread; `found` holds the answer within about `timeout` seconds."""

        def run() -> None:
            try:
                self.found.set_result(probe(self.servers, self.timeout))
            except Exception as exc:  # a probe is a courtesy: it never stops a chat
                self.found.set_exception(exc)

        threading.Thread(target=run, name="seelen-nearby", daemon=True).start()

    async def news(self) -> list[str]:
        """What to tell of the servers found and not told of before (then remembered as
        told). Waits for the probe, which ends within its timeout; a failed probe says
        nothing: it is a courtesy."""
        import asyncio

        try:
            answered = await asyncio.wrap_future(self.found)
        except Exception:
            return []
        found = self.untold(answered)
        self.remember(found)
        return [describe(f) for f in found]

    def untold(self, found: Sequence[FoundServer]) -> list[FoundServer]:
        """The servers of `found` not told of before in this profile."""
        told = self._told()
        return [f for f in found if f.server.base_url not in told]

    def remember(self, found: Sequence[FoundServer]) -> None:
        """Note these servers as told of; a profile folder that cannot be written is left."""
        told = self._told() | {f.server.base_url for f in found}
        with contextlib.suppress(OSError):
            atomic_write(self.told_file, "".join(f"{url}\n" for url in sorted(told)))

    def _told(self) -> set[str]:
        try:
            return set(self.told_file.read_text("utf-8").split())
        except OSError:
            return set()
