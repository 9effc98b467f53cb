"""Shared fixtures: every test gets its own data dir and a real OpenAI-protocol server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from model_server import ModelServer

# Bytecode caches on, whatever the shell says (PYTHONDONTWRITEBYTECODE=1 on some machines):
# without them each xdist worker rewrites every test module's asserts again (collection
# 9.5 -> 4.8 s of CPU per worker), and every `seelen` process the tests start compiles
# Seelen's modules anew. The caches are __pycache__ folders, ignored by git.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point Seelen at a temporary data dir and clear settings from the outer environment;
    no owner serving it outlives the test.

    Opening a profile narrows the process's umask (`seelen.files.make_private`); it is put
    back after each test, so that no test sees another's.
    """
    from helpers import end_owners

    for key in list(os.environ):
        if key.startswith(
            ("OPENAI_", "SEELEN_", "CHAT_", "TOOL_", "LLM_", "EMBEDDING_", "JINA_")
        ) or key in {
            "MAX_CONV_NUM",
            "REFRESH_EVERY_CONV_NUM",
            "TIMEZONE",
            "DEBUG_MODE",
            "ENABLE_MCP",
            "MCP_SERVERS_FILE",
            "TEMPERATURE",
            "DISABLED_TOOLS",
            "VISION",
            "CONTEXT_TOKENS",
            "RECALL_TOKENS",
        }:
            monkeypatch.delenv(key, raising=False)
    directory = tmp_path / "data"
    monkeypatch.setenv("SEELEN_DATA_DIR", str(directory))
    # Each test works in its own process (`seelen import`, `ask`); the tests about the warm
    # owner (`owner_env`) turn it on.
    monkeypatch.setenv("SEELEN_OWNER", "false")
    monkeypatch.chdir(tmp_path)  # no stray .env or mcp_servers.json from the checkout
    umask = os.umask(0o022)
    os.umask(umask)
    yield directory
    os.umask(umask)
    end_owners(directory)


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A real HTTP server speaking the OpenAI protocol (tests/model_server.py), closed after
    the test."""
    from model_server import ModelServer

    with ModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def prepared_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled embedding model as `onnx_session.prepare` keeps it, prepared once for the
    session (1.1 s of CPU) in a folder that held an older prepared copy: test_embed and
    test_lean_graph check it. Shared: read it; a test that loads or damages a prepared
    copy of its own copies it first."""
    from seelen.models import embed, onnx_session

    folder = tmp_path_factory.mktemp("prepared")
    model = embed.default_model_path()
    (folder / f"{model.stem}.0123456789abcdef.onnx").write_bytes(b"an older onnxruntime's")
    return onnx_session.prepare(model, folder)


@pytest.fixture
def env(model_server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> ModelServer:
    """Environment pointing Seelen at the test model server; returns the server."""
    monkeypatch.setenv("OPENAI_BASE_URL", model_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-key-123")
    monkeypatch.setenv("CHAT_MODEL", "test-model")
    monkeypatch.setenv("MAX_RETRIES", "1")
    monkeypatch.setenv("ENABLE_MCP", "false")
    monkeypatch.setenv("TIMEZONE", "UTC")
    # Each test answers in its own process; tests/test_owner.py covers the warm owner.
    monkeypatch.setenv("SEELEN_OWNER", "false")
    return model_server


@pytest.fixture
def owner_env(env: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """The test model server (echoing), with clients going through a real warm owner that
    is asked to stop after the test (it finishes on its own; the next test has its own data
    dir, and so its own owner)."""
    from helpers import echo

    from seelen.client import place
    from seelen.client.connect import request
    from seelen.config import load_settings
    from seelen.protocol import calls

    env.responder = echo
    monkeypatch.setenv("SEELEN_OWNER", "true")
    yield env
    request(place.socket_path(load_settings()), calls.Stop())
