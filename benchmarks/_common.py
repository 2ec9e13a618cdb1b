"""What the benchmark scripts share: where the real data lies and how they call the CLI."""
from __future__ import annotations

import json
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


def write_json(path: str | None, obj) -> None:
    """Write the benchmark's figures to ``path`` (folders made), if a path was given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(obj, indent=1))
        print(f"wrote {path}")
