"""Everything Seelen writes is in its data dir: nothing under the home folder besides it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_the_local_embedder_writes_nothing_outside_the_data_dir(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")
    }
    code = "from seelen.models.embed import LocalEmbedder; LocalEmbedder().embed(['hello'])"
    subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(home)}, check=True)
    # onnxruntime wrote .cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db}
    assert [p.relative_to(home) for p in home.rglob("*")] == []
