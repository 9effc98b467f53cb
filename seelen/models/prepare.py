"""`python -m seelen.models.prepare`: the bundled embedding model made ready to load, once
(install.sh runs it; see `onnx_session.prepare`)."""

from __future__ import annotations

import sys

from seelen.errors import SeelenError
from seelen.models.embed import default_model_path
from seelen.models.onnx_session import prepare


def main() -> int:
    try:
        prepare(default_model_path())
    except (SeelenError, OSError) as exc:  # each process then loads it the slower way
        print(f"seelen: the embedding model was not prepared: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
