"""`python -m seelen` and the `seelen` command."""

from seelen.heap import hold_collector


def main() -> None:
    """The `seelen` command, its garbage collector held while its modules load."""
    hold_collector()
    from seelen.cli.main import main as run_command

    run_command()


if __name__ == "__main__":
    main()
