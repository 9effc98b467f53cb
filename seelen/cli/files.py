"""`seelen persona|profile show|edit|history|restore|path`: the two memory files by hand.

An edit or a restore goes through the process that holds the profile (an open chat, the
warm owner, or one started for it), as `memory forget` does: an open chat stays open and
its next turn uses the new text. The editor runs on a copy, with no lock held, for as long
as the user likes; only the finished text is sent.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seelen.cli.common import DataOpt, ProfileOpt, existing_settings, memory_only, settings_from
from seelen.counts import counted
from seelen.errors import SeelenError

if TYPE_CHECKING:
    from seelen.config import Settings
    from seelen.memory.persona import PersonaFiles
    from seelen.protocol.results import FileWritten

# Characters of a version's opening that `history` shows: with its number and time before
# it (26 characters), the line fits a terminal of 80 columns.
HISTORY_PREVIEW = 54


def file_commands(sub: typer.Typer, filename: str, label: str) -> None:
    """Add show, edit, history, restore and path for `filename` to `sub`."""

    @sub.command("show")
    def show(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Print the file (the shipped default until it is first written)."""
        from seelen.chat.visible import visible

        settings = existing_settings(profile, data_dir)
        text = current_text(settings, filename)
        print(visible(text.rstrip()) or f"({label} is empty)")

    @sub.command("edit")
    def edit(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Open it in $EDITOR; the previous version is kept in history/. An open chat
        stays open and uses the new text from its next turn."""
        settings = settings_from(profile, None, data_dir)
        before = current_text(settings, filename)
        after = edited(filename, before)
        if before.strip() == after.strip():
            print(f"{filename}: unchanged")
            return
        try:
            written = write_file(settings, filename, after, f"{label} edit")
        except SeelenError as exc:  # what the user typed is never lost
            raise SeelenError(
                f"{exc}; your text is kept in {kept_aside(filename, after)}"
            ) from None
        if not written.changed:
            said = "unchanged"
        elif written.kept:
            said = "saved (previous version kept in history/)"
        else:  # an empty file leaves no version behind
            said = "saved (it was empty: no earlier version to keep)"
        print(f"{filename}: {said}")

    @sub.command("history")
    def history(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """List earlier versions, newest first (numbers for `restore`)."""
        from seelen.chat.visible import visible
        from seelen.memory.clock import Clock
        from seelen.memory.context import one_line

        settings = existing_settings(profile, data_dir)
        versions = list(reversed(_files(settings).versions(filename)))
        if not versions:
            print(f"no earlier versions of {label}")
        clock = Clock(settings.timezone)
        for number, path in enumerate(versions, start=1):
            saved = clock.fmt(int(path.stem.split(".")[-1]), seconds=True)
            first = " ".join(path.read_text("utf-8").split())  # its opening, on one line
            print(f"{number:>3}  {saved}  {visible(one_line(first, HISTORY_PREVIEW))}")

    @sub.command("restore")
    def restore(
        number: Annotated[
            int, typer.Argument(help="version from `history`; 1 = newest", metavar="NUMBER")
        ] = 1,
        profile: ProfileOpt = None,
        data_dir: DataOpt = None,
    ) -> None:
        """Bring back an earlier version (the current one is kept in history too)."""
        settings = existing_settings(profile, data_dir)
        versions = list(reversed(_files(settings).versions(filename)))
        if not versions:  # the state of the profile, not a wrong number: exit 1
            raise SeelenError(f"{label} has no earlier version yet")
        if not 1 <= number <= len(versions):  # a wrong value: a usage error, exit 2
            earlier = counted(len(versions), "earlier version")
            raise typer.BadParameter(
                f"{label} has {earlier}: give 1 to {len(versions)} (see history)",
                param_hint="NUMBER",
            )
        text = versions[number - 1].read_text("utf-8")
        write_file(settings, filename, text, f"{label} restore")
        print(f"restored {label} from version {number}")

    @sub.command("path")
    def path(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
        """Print where the file lives."""
        print(_files(existing_settings(profile, data_dir)).path(filename))


def _files(settings: Settings) -> PersonaFiles:
    """The profile's two files and their history, as a chat would read them."""
    from seelen.memory.persona import PersonaFiles

    return PersonaFiles(settings.profile_dir)


def current_text(settings: Settings, name: str) -> str:
    """The file's text as a chat would use it: the shipped default while it does not exist
    (nothing is created)."""
    from seelen.memory.persona import PERSONA

    files = _files(settings)
    files.load()
    return files.persona if name == PERSONA else files.profile


def edited(name: str, before: str) -> str:
    """`before` as the user left it in $VISUAL or $EDITOR (on a private copy). An editor that
    cannot start or fails, or leaves no file or no UTF-8 text, is one line and nothing is
    written; whatever the user typed is kept aside in a private file that the line names."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(before, "utf-8")
        try:
            subprocess.run([*shlex.split(editor), str(path)], check=True)
        except OSError as exc:
            why = f"cannot start the editor {editor!r} ({exc.strerror or exc}): set EDITOR"
            raise SeelenError(f"{why}; {name} is unchanged") from None
        except subprocess.CalledProcessError as exc:
            why = f"the editor {editor!r} ended with status {exc.returncode}"
            raise SeelenError(f"{why}; {name} is unchanged{_kept(name, path, before)}") from None
        if not path.is_file():
            why = f"the editor {editor!r} left no file to read"
            raise SeelenError(f"{why}; {name} is unchanged") from None
        data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"the edit is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        raise SeelenError(
            f"{why}; {name} is unchanged; your edit is kept in {kept_aside(name, data)}"
        ) from None


def _kept(name: str, path: Path, before: str) -> str:
    """ "; your edit is kept in FILE" when the failed editor left a changed text, else ""."""
    if not path.is_file() or (data := path.read_bytes()) == before.encode("utf-8"):
        return ""
    return f"; your edit is kept in {kept_aside(name, data)}"


def kept_aside(name: str, text: str | bytes) -> Path:
    """`text` saved in a private file of the temporary folder, for an edit not written."""
    fd, path = tempfile.mkstemp(prefix=f"seelen-{Path(name).stem}-", suffix=".txt")
    with os.fdopen(fd, "wb") as out:  # mkstemp makes it 0600
        out.write(text.encode("utf-8") if isinstance(text, str) else text)
    return Path(path)


def write_file(settings: Settings, name: str, text: str, role: str) -> FileWritten:
    """Replace `name` through the process that holds the profile, so an open chat stays open
    and uses it at once; where no owner can run, in this process as the profile's writer."""
    from seelen.client.exchange import memory_call
    from seelen.protocol import calls, events
    from seelen.protocol.results import FileWritten
    from seelen.service import ProfileService

    request = calls.WriteFile(name=name, text=text)
    final = memory_call(settings, request)
    if final is None:
        with memory_only(settings, role) as app:
            final = ProfileService(app).call(request)
    if isinstance(final, events.Failed):
        raise SeelenError(f"{final.message}; {name} is unchanged")
    if not isinstance(final, FileWritten):
        raise SeelenError(f"the background Seelen answered {final.TAG}; {name} is unchanged")
    return final
