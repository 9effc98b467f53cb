"""Export, then import into an empty profile: the profile as it was, its open session too."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import open_store, run_cli
from model_server import ModelServer, Reply

from seelen.store import ARCHIVED


def test_an_import_into_a_new_profile_restores_it_open_session_included(
    env: ModelServer, data_dir: Path, tmp_path: Path
) -> None:
    env.responder = lambda body: Reply(text=f"noted: {body['messages'][-1]['content'][:20]}")
    chat = run_cli("chat", stdin="my cat is Pixel\n/save\nmy dog is Rex\n")
    assert chat.returncode == 0, chat.stderr
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert run_cli("export", "--format", "json", "-o", str(first)).returncode == 0
    elsewhere = str(tmp_path / "elsewhere")
    imported = run_cli("--data-dir", elsewhere, "import", str(first))
    assert imported.returncode == 0, imported.stderr
    assert "kept as archived" not in imported.stdout + imported.stderr
    out = run_cli("--data-dir", elsewhere, "export", "--format", "json", "-o", str(second))
    assert out.returncode == 0, out.stderr
    assert json.loads(second.read_text()) == json.loads(first.read_text())
    store = open_store(Path(elsewhere))
    active = store.active_session()
    assert active is not None
    assert store.turns(active.session_id)[0].text == "my dog is Rex"
    assert [s.status for s in store.list_sessions()].count(ARCHIVED) == 1
    store.close()
    again = run_cli("--data-dir", elsewhere, "import", str(first))  # adds nothing
    assert again.returncode == 0 and "Imported 0 sessions" in again.stderr, again.stderr
    assert "kept as archived" not in again.stdout + again.stderr
