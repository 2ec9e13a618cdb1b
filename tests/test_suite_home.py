"""The suite writes nothing into the user's home (issue 54 item 9: five partitions were left in
``~/.cache/gnnscale/partitions``): conftest points ``$GNNSCALE_CACHE`` at a temporary folder of
its own before anything starts, and every process the tests start inherits it."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import SUITE_CACHE


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_cached_run_of_the_suite_leaves_nothing_in_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert os.environ["GNNSCALE_CACHE"] == SUITE_CACHE
    assert Path(SUITE_CACHE).is_relative_to(tempfile.gettempdir())
    before = set(_files(Path(SUITE_CACHE)))
    # what a --dataset run without --cache-dir does first (gnnscale train's prepare_parts), as the
    # tests run the CLI: in a subprocess that inherits the suite's environment, with HOME a fresh folder
    code = ("from gnnscale.data.partition_cache import prepare_parts; "
            "print(prepare_parts('synthetic?num_nodes=300&num_features=8', 2))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, HOME=str(home)))
    assert r.returncode == 0, r.stderr[-3000:]
    assert _files(home) == []
    made = set(_files(Path(SUITE_CACHE))) - before
    assert Path(r.stdout.strip()).parent == Path(SUITE_CACHE)
    assert any(name.startswith("synthetic_num_nodes_300") for name in made), made
