"""Log files: rotated, private (0600 in 0700), secrets redacted before they are written."""

from __future__ import annotations

import base64
import logging
import os
import stat
from pathlib import Path

import pytest

from seelen.logs import PromptLog, file_logger, mask_url, redact


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("key sk-proj-abcdef123456 here", "sk-proj-abcdef123456", "key [redacted] here"),
        ("Authorization: Bearer eyJhbGciOi.payload.sig", "eyJhbGciOi", "Bearer [redacted]"),
        ("GET https://h.io/mcp?token=s3cr3tvalue&x=1", "s3cr3tvalue", "?token=[redacted]&x=1"),
        ("https://me:hunter2pass@h.io/sse", "hunter2pass", "https://[redacted]@h.io/sse"),
        ("api_key=abc123def456 and more", "abc123def456", "api_key=[redacted]"),
    ],
)
def test_secrets_in_text_are_masked(text: str, hidden: str, kept: str) -> None:
    out = redact(text)
    assert hidden not in out and kept in out


def test_a_given_secret_is_masked_wherever_it_appears() -> None:
    assert redact("my token is plainword99 ok", "plainword99") == "my token is [redacted] ok"
    assert redact("the word is", "is") == "the word is"  # too short to be a secret


def test_a_token_in_a_server_url_is_masked_for_display() -> None:
    assert mask_url("https://h.io/mcp") == "https://h.io/mcp"
    assert mask_url("https://h.io/v1/mcp/a1B2c3D4e5F6g7H8i9J0kL/sse") == (
        "https://h.io/v1/mcp/[redacted]/sse"
    )
    assert mask_url("https://h.io/mcp?api_key=zz99zz99") == "https://h.io/mcp?api_key=[redacted]"
    assert "pw" not in mask_url("http://user:pw@localhost:8080/mcp")
    assert mask_url("https://api.githubcopilot.com/mcp/") == "https://api.githubcopilot.com/mcp/"


def test_prompt_log_is_private_and_redacted(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a permissive umask must not make the log readable to others
    try:
        log = PromptLog(tmp_path / "logs", "sk-live-abcdefgh1234")
        log([{"role": "user", "content": "my key sk-live-abcdefgh1234, Bearer abc.def.ghi123"}])
        log.close()
    finally:
        os.umask(old)
    path = tmp_path / "logs" / "prompts.jsonl"
    text = path.read_text()
    assert "abcdefgh1234" not in text and "abc.def.ghi123" not in text
    assert '"role": "user"' in text
    assert mode(tmp_path / "logs") == 0o700 and mode(path) == 0o600


def test_prompt_log_keeps_the_size_of_an_image_not_its_bytes(tmp_path: Path) -> None:
    data = base64.b64encode(b"\x89PNG" + b"x" * 3000).decode()
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    log = PromptLog(tmp_path / "logs")
    log([{"role": "user", "content": [part]}])
    log.close()
    text = (tmp_path / "logs" / "prompts.jsonl").read_text()
    assert "data:image/png;base64,[3,004 bytes]" in text and data[:40] not in text


def test_log_files_rotate_and_backups_stay_private(tmp_path: Path) -> None:
    logger = file_logger("t", tmp_path / "logs" / "x.log")
    logger.handlers[0].maxBytes = 200  # type: ignore[attr-defined]
    for i in range(20):
        logger.info("line %d %s", i, "x" * 40)
    for handler in logger.handlers:
        handler.close()
    files = sorted((tmp_path / "logs").iterdir())
    assert [f.name for f in files] == ["x.log", "x.log.1", "x.log.2", "x.log.3"]
    assert all(mode(f) == 0o600 for f in files)
    assert "line 19" in files[0].read_text()


def test_a_traceback_is_redacted_too(tmp_path: Path) -> None:
    logger = file_logger("t", tmp_path / "e.log")
    try:
        raise ValueError("failed with key sk-abcdefghijkl")
    except ValueError:
        logger.exception("call failed")
    logger.handlers[0].close()
    text = (tmp_path / "e.log").read_text()
    assert "call failed" in text and "ValueError" in text and "sk-abcdefghijkl" not in text


def test_seelen_records_never_reach_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("seelen.anything").warning("a warning nobody asked to see")
    assert capfd.readouterr().err == ""
