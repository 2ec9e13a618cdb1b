"""The partition cache of ``--dataset`` runs: a dataset cut into parts once, reused by later runs.

The folder is named by the dataset, the method, the part count and a hash of every option that
changes the cut (root, balance, imbalance, seed, method options); a folder with a complete
``meta.json`` of the right part count is reused. Torch-free until it partitions.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from gnnscale.errors import GnnscaleError

log = logging.getLogger("gnnscale")


def cache_folder(dataset: str, parts: int, root: str | None = None, cache_dir: str | None = None,
                 method: str = "metis", seed: int = 0, balance=("nodes", "train"), imbalance: float = 0.05,
                 method_opt=()) -> Path:
    """Where the cut of ``dataset`` into ``parts`` parts with these options is kept."""
    base = cache_dir or os.environ.get("GNNSCALE_CACHE") or os.path.join(Path.home(), ".cache", "gnnscale", "partitions")
    key = json.dumps([dataset, os.path.abspath(root) if root else None, method, sorted(balance), imbalance, seed,
                      sorted(map(str, method_opt))])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset)[:60]
    return Path(base) / f"{slug}-{method}-{parts}parts-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def prepare_parts(dataset: str, parts: int, root: str | None = None, cache_dir: str | None = None,
                  method: str = "metis", seed: int = 0, balance=("nodes", "train"), imbalance: float = 0.05,
                  method_opt=()) -> str:
    """The cached partition of ``dataset`` into ``parts`` parts (made on first use); its folder."""
    from gnnscale.partitioning import load_meta

    out = cache_folder(dataset, parts, root, cache_dir, method, seed, balance, imbalance, method_opt)
    if (out / "meta.json").exists():
        try:
            meta = load_meta(out)
            if meta["num_parts"] == parts:
                log.info("using cached partition %s", out)
                return str(out)
        except GnnscaleError:
            pass
    log.info("partitioning %s into %d parts (cache folder: %s)", dataset, parts, out)
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    data = load_dataset(dataset, root=root)
    partition_graph(data, parts, out, method=method, balance=list(balance), imbalance=imbalance, seed=seed,
                    dataset=dataset, options=dict(method_opt))
    return str(out)
