"""`seelen server status|stop`: the profile's warm background process, as a typer sub-app
(`cli/main.py` registers it)."""

from __future__ import annotations

import typer

from seelen.cli.common import DataOpt, ProfileOpt, settings_from
from seelen.counts import counted

server_app = typer.Typer(
    no_args_is_help=True,
    help="The warm background process that answers `seelen ask` for a profile.\n\n"
    "It starts on the first `ask`, keeps your memory and models loaded, and exits after "
    "SEELEN_IDLE_MINUTES without questions.",
)


@server_app.command("status")
def server_status(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """Show whether the background process runs, since when, and how much it answered.

    "not running" is an answer, not an error: the exit status is 0 either way; a script
    checks for a line starting with "running:".
    """
    import time

    from seelen.client.connect import owner_status

    status = owner_status(settings_from(profile, None, data_dir))
    if status is None:  # like `docker ps` or `git status`: the state asked for, reported
        print("not running")
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status.started))
    print(
        f"running: pid {status.pid} ({status.kind}"
        f"{', memory calls only' if status.memory_only else ''}"
        f"{', resting: nothing loaded until the next request' if status.resting else ''}), "
        f"since {started}, "
        f"{counted(status.answered, 'answer')}, {'busy' if status.busy else 'idle'}, "
        f"version {status.version}"
    )


@server_app.command("stop")
def server_stop(profile: ProfileOpt = None, data_dir: DataOpt = None) -> None:
    """End the background process (it finishes the answer it is giving first)."""
    from seelen.client.connect import stop_owner

    print("stopped" if stop_owner(settings_from(profile, None, data_dir)) else "not running")
