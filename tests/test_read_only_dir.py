"""A data directory that cannot be written (a backup mounted read-only): reading needs no write.

The folder's write bits are taken away, and the readers run in a real process: under root,
without the capability to override file modes (root writes through any mode otherwise).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import CliResult, run_cli
from model_server import ModelServer

PR_CAPBSET_DROP = 24  # prctl(2)
CAP_DAC_OVERRIDE = 1  # capabilities(7): write (and read) whatever the file's mode


def _without_override() -> None:
    """In the child, before exec: drop the capability from the bounding set, so the exec'd
    program runs without it even as root."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under `root` with its size, modification time and mode."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def read_only_data(env: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A profile with one answered question, in a data dir its readers cannot write."""
    top = Path(tempfile.mkdtemp(prefix="seelen-ro-"))
    data = top / "data"
    monkeypatch.setenv("SEELEN_DATA_DIR", str(data))
    env.enqueue("Noted: the spare key is under the blue flowerpot.")
    asked = run_cli("ask", "Where did I leave the spare key? Under the blue flowerpot.")
    assert asked.returncode == 0, asked.stderr
    for path in [top, *top.rglob("*")]:
        os.chmod(path, 0o500 if path.is_dir() else 0o400)
    try:
        yield data
    finally:
        for path in [top, *top.rglob("*")]:
            os.chmod(path, 0o700)
        shutil.rmtree(top)


# The readers, one after the other in one process (each as the `seelen` command runs it,
# `helpers.run_cli`): what each printed, as JSON.
_READERS = """
import json, sys
from helpers import CliResult, run_cli
results = [run_cli(*args) for args in json.loads(sys.argv[1])]
print(json.dumps([[r.returncode, r.stdout, r.stderr] for r in results]))
"""


def _readers(data: Path, *commands: tuple[str, ...]) -> list[CliResult]:
    """`seelen ARGS` of each of `commands` in a process that cannot write to `data`."""
    env = {
        **os.environ,
        "SEELEN_DATA_DIR": str(data),
        "HOME": str(data.parent),
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", _READERS, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=data.parent,
        preexec_fn=_without_override if os.geteuid() == 0 else None,
    )
    assert done.returncode == 0, done.stderr
    return [CliResult(*result) for result in json.loads(done.stdout)]


def test_lists_shows_searches_and_export_work_in_a_read_only_data_dir(
    read_only_data: Path,
) -> None:
    before = _tree(read_only_data)
    listed, found, exported, shown = _readers(
        read_only_data,
        ("sessions", "list"),
        ("memory", "search", "--json", "spare key"),
        ("export",),
        ("profile", "show"),
    )
    assert listed.returncode == 0, listed.stderr
    assert "1 turn" in listed.stdout or "2 turns" in listed.stdout
    assert found.returncode == 0, found.stderr
    texts = [t["text"] for t in json.loads(found.stdout)["turns"]]
    assert "Where did I leave the spare key? Under the blue flowerpot." in texts
    assert exported.returncode == 0, exported.stderr
    assert "blue flowerpot" in exported.stdout
    assert shown.returncode == 0, shown.stderr
    assert _tree(read_only_data) == before  # nothing written, nothing created
