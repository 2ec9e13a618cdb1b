"""``gnnscale embed``: every node's embedding from a saved model, written per part, read back as one array.

One worker per part computes its own nodes' final embeddings with the one layer-wise inference
(:func:`~gnnscale.tasks.inference.streamed_inference`: memory follows the part) and writes them
with the nodes' original ids. For a link-prediction model the embedding is its encoder's output
(what the decoder scores); for a node classifier, the model's output (its logits).

Layout of ``OUT/``::

    meta.json          {"format": "gnnscale-embeddings-1", "num_nodes": N, "dim": H, "num_parts": P,
                        "model": FILE, "parts_dir": DIR, "files": {name: sha256}}
    part{p}.npy        float32 [n_p, H]  embeddings of part p's nodes
    ids{p}.npy         int64 [n_p]       their original (dataset) ids

:func:`load_embeddings` reads them back as one float32 [N, H] array in the dataset's node order
(a memory-mapped part at a time).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from gnnscale.errors import GnnscaleError

FORMAT = "gnnscale-embeddings-1"


def embed_worker(parts_dir: str, cfg, model_path: str, out_dir: str) -> dict:
    """One process of ``gnnscale embed`` (one per part): writes ``part{p}.npy`` and ``ids{p}.npy``."""
    from gnnscale.data.open import open_data
    from gnnscale.logs import setup_logging
    from gnnscale.tasks.inference import streamed_inference
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.planning.plan import plan_run
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.partitioning.format import _save
    from gnnscale.process.dims import ParallelDims
    from gnnscale.training.model_io import read_model_file

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    meta = load_meta(parts_dir)
    plan = plan_run(cfg, meta, int(os.environ.get("WORLD_SIZE", "1")), where=str(parts_dir))
    dims = ParallelDims.build(plan, cfg.timeout)
    try:
        part = load_part(parts_dir, dims.rank, verify=cfg.verify)
        blob = read_model_file(model_path)
        net = ModelSpec(**blob["spec"]).build()
        net.load_state_dict(blob["state"])
        net.eval()
        from gnnscale.nn.link import gnn_of

        encoder = gnn_of(net)
        # no samplers: inference reads the whole part, layer by layer
        data = open_data(part, cfg, dims.data, mode=plan.mode, parts_dir=parts_dir, degrees=encoder.uses_degree,
                         samplers=False)
        with torch.no_grad():
            h = streamed_inference(encoder, part.indptr, part.indices, data.features, node_degree=data.degrees,
                                   backend=cfg.sampler_backend,
                                   edge_attr=part.edge_attr if encoder.uses_edge_attr else None)
        out = Path(out_dir)
        files = {f"part{dims.rank}.npy": _save(out / f"part{dims.rank}.npy", h.numpy().astype(np.float32, copy=False)),
                 f"ids{dims.rank}.npy": _save(out / f"ids{dims.rank}.npy", part.orig_ids.numpy())}
        every = dims.comm.all_gather_object(files)
        if dims.rank == 0:
            merged = {k: v for f in every for k, v in f.items()}
            info = {"format": FORMAT, "num_nodes": int(meta["num_nodes"]), "dim": int(h.shape[1]),
                    "num_parts": int(meta["num_parts"]), "model": os.path.abspath(model_path),
                    "parts_dir": os.path.abspath(parts_dir), "files": merged}
            with open(out / "meta.json", "w") as f:
                json.dump(info, f, indent=1)
        return {"rows": int(h.shape[0]), "dim": int(h.shape[1])}
    finally:
        dims.stop()


def load_embeddings(out_dir: str | os.PathLike, verify: bool = True) -> np.ndarray:
    """float32 [N, H]: the embeddings ``gnnscale embed`` wrote to ``out_dir``, in the dataset's
    node order (row i: original node i). ``verify``: check every file's sha256 first."""
    root = Path(out_dir)
    path = root / "meta.json"
    if not path.is_file():
        raise GnnscaleError(f"{root}: expected an embeddings folder written by `gnnscale embed` (meta.json), found "
                            "none; run `gnnscale embed --model FILE --parts-dir DIR --out "
                            f"{root}`")
    info = json.loads(path.read_text())
    if info.get("format") != FORMAT:
        raise GnnscaleError(f"{path}: expected format {FORMAT}, found {info.get('format')!r}; rerun gnnscale embed")
    if verify:
        from gnnscale.partitioning.manifest import sha256_file

        for name, digest in info["files"].items():
            if sha256_file(root / name) != digest:
                raise GnnscaleError(f"{root / name}: its sha256 differs from meta.json's (a changed or partly written "
                                    "file); rerun gnnscale embed")
    out = np.empty((int(info["num_nodes"]), int(info["dim"])), dtype=np.float32)
    for p in range(int(info["num_parts"])):  # a loop over parts
        ids = np.load(root / f"ids{p}.npy")
        out[ids] = np.load(root / f"part{p}.npy", mmap_mode="r")
    return out
