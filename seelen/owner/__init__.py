"""The owner of a profile as a process: `python -m seelen.owner`, and its socket server (also
run by an open chat). The thin client that talks to it lives in `seelen.client`."""
