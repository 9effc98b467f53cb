"""`seelen doctor` on a damaged memory reports the damage among its checks."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli
from model_server import ModelServer, Reply


def test_doctor_on_a_damaged_database_still_checks_the_rest(
    env: ModelServer, data_dir: Path
) -> None:
    assert run_cli("chat", stdin="hello\nworld\n").returncode == 0
    db = data_dir / "default" / "chat_sessions.db"
    damaged = bytearray(db.read_bytes())
    for at in range(4096, len(damaged)):  # every page after the first overwritten
        damaged[at] = 0x41
    db.write_bytes(bytes(damaged))
    env.enqueue(Reply(text="ready"))
    result = run_cli("doctor")
    assert result.returncode == 1
    shown = " ".join(result.stdout.split())
    assert "provider openai" in shown and "✓ model answers: answered 'ready'" in shown
    assert f"{db} is damaged" in result.stdout.replace("\n", "")
    assert "✗ memory store:" in shown
    assert "✗ vector index: not checked" in shown
    assert result.stderr == ""  # (before: doctor stopped at the store's one error line)
