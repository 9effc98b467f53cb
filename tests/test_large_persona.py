"""A persona or profile too large for the prompt is said once, with how to fix it."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli
from model_server import ModelServer


def test_a_huge_persona_is_used_in_part_and_said_once(env: ModelServer, data_dir: Path) -> None:
    env.responder = lambda body: "ok"
    assert run_cli("ask", "hello").returncode == 0
    persona = data_dir / "default" / "persona_memory.txt"
    persona.write_text("I am kind and patient. " * 100_000)  # 2.3 MB
    chat = run_cli("chat", stdin="first\nsecond\n")
    assert chat.returncode == 0, chat.stderr
    said = "persona_memory.txt is too large to use whole (2,300,000 characters"
    assert chat.stdout.replace("\n", " ").count(said) == 1, chat.stdout
    assert "`seelen persona edit`" in chat.stdout.replace("\n", " ")
    system = env.last_messages()[0]["content"]
    assert "I am kind and patient." in system and len(system) < 20_000  # its beginning only
    ask = run_cli("ask", "third")
    assert ask.returncode == 0 and ask.stdout == "ok\n"
    assert said in ask.stderr.replace("\n", " ")


def test_a_pasted_message_too_long_for_the_prompt_says_it_is_clipped(
    env: ModelServer, data_dir: Path
) -> None:
    env.responder = lambda body: "ok"
    pasted = "line of a long log. " * 50_000  # 1 MB
    chat = run_cli("chat", stdin=f"{pasted}\nshort one\n")
    assert chat.returncode == 0, chat.stderr
    shown = chat.stdout.replace("\n", " ")
    assert shown.count("is too long for the prompt") == 1  # the short one fits
    assert f"your message ({len(pasted):,} characters) is too long for the prompt" in shown
    assert "it is stored whole" in shown
