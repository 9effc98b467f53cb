"""With no endpoint configured, a chat says once which OpenAI-compatible server already
answers on this machine (Ollama, LM Studio, llama.cpp's server) and how to use it: probed
here on real ports, by real HTTP servers."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from model_server import ModelServer
from rich.console import Console

from seelen.config import load_settings
from seelen.models.nearby import KnownServer, NearbyServers, offers_nearby, probe


@pytest.fixture
def other_web_server(tmp_path: Path) -> Iterator[str]:
    """A web server that is not an OpenAI-compatible one (files, and 404 for /v1/models)."""

    def handler(*args: object) -> SimpleHTTPRequestHandler:
        return SimpleHTTPRequestHandler(*args, directory=str(tmp_path))  # type: ignore[arg-type]

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_only_a_server_that_lists_models_the_openai_way_is_found(
    model_server: ModelServer, other_web_server: str
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: the port refuses at once
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # takes the connection, never answers: the probe gives up on it
    servers = [
        KnownServer("Ollama", model_server.url),
        KnownServer("LM Studio", f"http://127.0.0.1:{closed.getsockname()[1]}/v1"),
        KnownServer("llama.cpp's server", f"http://127.0.0.1:{silent.getsockname()[1]}/v1"),
        KnownServer("a web page", other_web_server),
    ]
    try:
        found = probe(servers, timeout=0.5)
    finally:
        closed.close()
        silent.close()
    assert [(f.server.name, f.models) for f in found] == [("Ollama", ("test-model",))]


async def test_a_chat_says_once_per_profile_how_to_use_the_server_found(
    model_server: ModelServer, data_dir: Path
) -> None:
    from seelen.chat.repl import Repl

    servers = [KnownServer("Ollama", model_server.url)]
    settings = load_settings()
    assert offers_nearby(settings)  # no endpoint configured: the bundled model would start
    out = io.StringIO()
    nearby = NearbyServers(settings.profile_dir, servers, timeout=0.5)
    nearby.start()
    await Repl(None, Console(file=out, width=400), settings=settings, nearby=nearby).tell_nearby()
    assert out.getvalue().strip() == (
        f"Ollama answers at {model_server.url} and offers 1 model: test-model. To chat with "
        f"it instead of the small bundled model: OPENAI_BASE_URL={model_server.url} "
        "CHAT_MODEL=test-model (in .env or the environment; OPENAI_API_KEY only if the "
        "server asks for one)."
    )
    again = NearbyServers(settings.profile_dir, servers, timeout=0.5)
    again.start()
    assert await again.news() == []  # told once: the profile remembers it
    assert model_server.paths.count("GET /v1/models") == 2  # asked each time, told once


def test_no_probe_once_an_endpoint_or_the_local_model_is_chosen() -> None:
    assert not offers_nearby(load_settings({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}))
    assert not offers_nearby(load_settings({"OPENAI_API_KEY": "sk-x"}))
    assert not offers_nearby(load_settings({"LLM_PROVIDER": "local"}))


async def test_a_chat_on_the_bundled_model_with_no_server_near_says_how_to_set_one_up(
    data_dir: Path,
) -> None:
    """A newcomer with no settings chatted with the 135M bundled model and was told nothing:
    its answers passed for Seelen's best. With no server found, each start says how to set
    a model up; with one found (above), how to use that one instead."""
    from seelen.chat.repl import Repl
    from seelen.chat.welcome import ON_BUNDLED

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: nothing answers there
    settings = load_settings()
    servers = [KnownServer("Ollama", f"http://127.0.0.1:{closed.getsockname()[1]}/v1")]
    try:
        for _ in range(2):  # at each start, while nothing is configured
            out = io.StringIO()
            nearby = NearbyServers(settings.profile_dir, servers, timeout=0.5)
            nearby.start()
            repl = Repl(None, Console(file=out, width=400), settings=settings, nearby=nearby)
            await repl.tell_nearby()
            assert out.getvalue() == ON_BUNDLED + "\n"
    finally:
        closed.close()
    assert "OPENAI_API_KEY" in ON_BUNDLED and ".env" in ON_BUNDLED
    out = io.StringIO()
    await Repl(None, Console(file=out), settings=settings, nearby=None).tell_nearby()
    assert out.getvalue() == ""  # a model is configured, or LLM_PROVIDER=local chose this one
