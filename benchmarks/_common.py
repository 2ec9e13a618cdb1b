"""What the benchmark scripts share: where the real data lies and how they call the CLI."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GNNSCALE_SHARED_DATA", REPO.parent / "shared" / "data"))


def gnnscale(*args: str) -> None:
    """Run ``python -m gnnscale ARGS``; on failure exit with the command and its stderr's tail."""
    r = subprocess.run([sys.executable, "-m", "gnnscale", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode:
        raise SystemExit(f"gnnscale {' '.join(args)} failed:\n{r.stderr[-3000:]}")
