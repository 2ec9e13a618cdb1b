"""The ``gnnscale`` command line (torch-free until a command needs torch)."""
from __future__ import annotations

from gnnscale.cli.main import main

__all__ = ["main"]
