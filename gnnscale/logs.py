"""Readable logs: one format for the CLI and every worker (rank-tagged)."""
from __future__ import annotations

import logging
import sys


def setup_logging(rank: int | None = None, level: int = logging.INFO) -> None:
    """Log to stderr as ``HH:MM:SS [rank r] message``; workers other than rank 0 log warnings only."""
    tag = "" if rank is None else f"[rank {rank}] "
    fmt = f"%(asctime)s {tag}%(message)s"
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, datefmt="%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(level if rank in (None, 0) else max(level, logging.WARNING))
