"""Checkpoints: written atomically with a sha256 per file, the newest K kept, exact resume.

Layout of ``--checkpoint-dir DIR``::

    DIR/step-000000042/           one checkpoint, named by the global step it resumes at
        train.pt                  rank 0: model and optimizer state, epoch, step in epoch,
                                  global step, metrics history, best validation, config
        rank{r}.pt                every rank: torch's RNG state (dropout), the feature cache's
                                  row ids, the epoch's partial loss/accuracy sums
        manifest.json             written last: files and their sha256, epoch, step, world size

A checkpoint is built in ``DIR/.tmp-step-...`` (each file written, flushed and fsynced), then
renamed into place by rank 0 once every rank's files are in: a folder named ``step-*`` with a
manifest is complete. Resuming picks the newest checkpoint whose files all match their sha256;
a damaged newer one is reported and skipped. What is not saved: the learning rate has no
schedule (Adam with a constant rate); historical mode's halo tables are refilled by layer-wise
inference at start-up (so a historical resume is close, not bit-exact); the sampler needs no
state (its draws are keyed by epoch, step and node).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.manifest import sha256_file

log = logging.getLogger("gnnscale.training.checkpoint")

PREFIX = "step-"
TMP_PREFIX = ".tmp-"
MANIFEST = "manifest.json"


class CheckpointError(GnnscaleError):
    """No usable checkpoint, or one that does not fit this run."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint's files could not be written (every rank raises it alike, :func:`save`)."""


@dataclass
class Found:
    """A complete, verified checkpoint."""

    path: Path
    manifest: dict

    @property
    def global_step(self) -> int:
        return int(self.manifest["global_step"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str | os.PathLike, obj: Any) -> str:
    """``torch.save`` ``obj`` to ``path`` (flushed and fsynced); its sha256."""
    import torch

    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    return sha256_file(path)


def name(global_step: int) -> str:
    return f"{PREFIX}{global_step:09d}"


def save(ckpt_dir: str | os.PathLike, global_step: int, rank: int, comm, mine: dict, shared: dict | None,
         info: dict, keep: int) -> Path:
    """Write one checkpoint (collective: every rank of ``comm`` calls it).

    Args:
        global_step: the step a resumed run starts at (names the checkpoint).
        mine: this rank's state (``rank{r}.pt``). shared: rank 0's ``train.pt`` (None elsewhere).
        info: figures for the manifest (epoch, step in epoch, ...).
        keep: how many checkpoints to keep (the oldest beyond it are removed).
    """
    root = Path(ckpt_dir)
    tmp = root / f"{TMP_PREFIX}{name(global_step)}"
    try:  # a failed write (a full disk, the folder removed) travels in the gather: every rank stops alike
        tmp.mkdir(parents=True, exist_ok=True)
        files: dict | str = {f"rank{rank}.pt": write_file(tmp / f"rank{rank}.pt", mine)}
        if rank == 0:
            files["train.pt"] = write_file(tmp / "train.pt", shared)
    except OSError as err:
        files = f"rank {rank}: {err.strerror or type(err).__name__}" + (f": {err.filename}" if err.filename else "")
    every = comm.all_gather_object(files) if comm.world_size > 1 else [files]
    failed = [f for f in every if isinstance(f, str)]
    if failed:
        shutil.rmtree(tmp, ignore_errors=True)
        done = sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir()) if root.is_dir() else []
        newest = (f"the newest checkpoint, {done[-1]}, holds the run up to it (--resume continues from it)" if done
                  else "no checkpoint was written before it")
        raise CheckpointWriteError(f"--checkpoint-dir {ckpt_dir}: the checkpoint of step {global_step} could not be "
                                   f"written ({failed[0]}), so training stopped; {newest}")
    final = root / name(global_step)
    if rank == 0:
        manifest = dict(info, global_step=global_step, world_size=comm.world_size, created=time.time(),
                        files={k: v for f in every for k, v in f.items()})
        with open(tmp / MANIFEST, "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():  # a rerun reached the same step: the new one replaces it
            shutil.rmtree(final)
        os.rename(tmp, final)
        _fsync_dir(root)
        for old in sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir())[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
        for torn in root.glob(f"{TMP_PREFIX}{PREFIX}*"):  # unfinished writes of a killed run
            shutil.rmtree(torn, ignore_errors=True)
    if comm.world_size > 1:
        comm.barrier()  # nobody goes on before the checkpoint is in place
    return final


def verify(path: Path, world_size: int | None = None) -> tuple[dict | None, str | None]:
    """(manifest, None) if ``path`` is a complete checkpoint whose files match their sha256,
    else (None, what is wrong)."""
    mf = path / MANIFEST
    if not mf.is_file():
        return None, f"{mf} is missing (an unfinished write)"
    try:
        manifest = json.loads(mf.read_text())
        files = manifest["files"]
    except (ValueError, KeyError) as err:
        return None, f"{mf} is not a checkpoint manifest ({err})"
    if world_size is not None and int(manifest.get("world_size", -1)) != world_size:
        return None, (f"it was written by {manifest.get('world_size')} workers, this run has {world_size} "
                      "(resume with the same --workers and parts)")
    for fname, digest in files.items():
        f = path / fname
        if not f.is_file():
            return None, f"{f} is missing"
        got = sha256_file(f)
        if got != digest:
            return None, f"{f} has sha256 {got[:12]}..., the manifest says {digest[:12]}... (damaged)"
    return manifest, None


def find_latest(ckpt_dir: str | os.PathLike, world_size: int | None = None, report=log.warning) -> Found | None:
    """The newest verified checkpoint in ``ckpt_dir`` (None if there is none); each damaged
    newer one is reported through ``report``."""
    root = Path(ckpt_dir)
    if not root.is_dir():
        return None
    for path in sorted((p for p in root.glob(f"{PREFIX}*") if p.is_dir()), reverse=True):
        manifest, problem = verify(path, world_size)
        if manifest is not None:
            return Found(path, manifest)
        if report is not None:
            report(f"checkpoint {path.name} is not usable: {problem}; trying the one before it")
    return None


def load(found: Found, fname: str) -> Any:
    import torch

    return torch.load(found.path / fname, map_location="cpu", weights_only=False)


# Options that change what is trained must match on resume; run options (epochs, timeout, ...) may not.
RESUME_KEYS = ("fanouts", "hidden", "layer", "layer_kwargs", "dropout", "norm", "residual", "jk", "lr", "weight_decay",
               "seed", "batch_size", "exchange", "staleness", "num_layers", "pipeline_stages", "stage_layers",
               "micro_batches", "schedule", "chunks", "halo_gradients", "edge_features")


def find_resume(cfg, comm, rank: int, world: int) -> tuple[Found | None, dict]:
    """The checkpoint this run resumes from (None: a fresh start) and this rank's file of it;
    every rank agrees (collective).

    ``--resume``, or a restart under torchrun's elastic agent (``TORCHELASTIC_RESTART_COUNT``
    above 0) with a checkpoint folder, resumes from the newest valid checkpoint.

    Raises:
        CheckpointError: the ranks found different newest checkpoints, or ``--resume`` found none.
    """
    restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
    if not cfg.checkpoint_dir or not (cfg.resume or restarted):
        return None, {}
    found = find_latest(cfg.checkpoint_dir, world, report=log.warning if rank == 0 else None)
    step = found.global_step if found is not None else -1
    agreed = comm.all_reduce_named({"min": step, "max": -step}, "min")
    if int(agreed["min"]) != -int(agreed["max"]):
        raise CheckpointError(f"rank {rank}: the ranks found different newest checkpoints in {cfg.checkpoint_dir} "
                              f"(steps {int(agreed['min'])} to {-int(agreed['max'])}); is the folder shared by every "
                              "worker?")
    if found is None:
        if cfg.resume and not restarted:
            raise CheckpointError(f"--resume: no complete checkpoint in {cfg.checkpoint_dir}; run without --resume to "
                                  "start afresh")
        return None, {}
    mine = load(found, f"rank{rank}.pt")
    if rank == 0:
        log.info("resuming from %s (epoch %d, step %d of it, global step %d)", found.path, found.manifest["epoch"],
                 found.manifest["step"], found.global_step)
    return found, mine


def check_config(saved: dict, want: dict, where) -> None:
    """Raise CheckpointError if an option that changes what is trained differs from the checkpoint's."""
    for key in RESUME_KEYS:
        if key in saved and saved[key] != want.get(key):
            raise CheckpointError(f"--resume: the checkpoint in {where} was written with {key}={saved[key]!r}, this "
                                  f"run has {key}={want.get(key)!r}; resume with the same options, or start afresh in "
                                  "another --checkpoint-dir")
