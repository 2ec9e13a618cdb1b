"""Shared test fixtures: where the real data lies (../shared/data, never copied into the repo)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Worker modules (tests/dist_workers.py) must be importable by spawned processes.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def shared_data_dir() -> Path:
    """``$GNNSCALE_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get("GNNSCALE_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real data folder {path} not found (set GNNSCALE_SHARED_DATA)")
    return path
