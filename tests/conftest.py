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


@pytest.fixture(scope="session")
def cora(shared_data):
    """Planetoid Cora from the shared data folder (``Data``: 2708 nodes, 1433 features, 7 classes)."""
    from gnnscale.datasets import load_dataset

    return load_dataset("planetoid:cora", root=str(shared_data / "planetoid" / "raw"))


@pytest.fixture(scope="session")
def cora_partition(cora, tmp_path_factory):
    """``cora_partition(n, method="metis")``: the folder of Cora cut into n parts, made once per session."""
    made: dict = {}

    def get(parts: int, method: str = "metis") -> str:
        if (parts, method) not in made:
            from gnnscale.partitioning import partition_graph

            out = tmp_path_factory.mktemp(f"cora_{method}{parts}")
            partition_graph(cora, parts, out, method=method, dataset="planetoid:cora")
            made[parts, method] = str(out)
        return made[parts, method]

    return get
