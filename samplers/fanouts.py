"""Fan-out lists (neighbors sampled per layer): their validation.

Torch-free, so that the launcher of ``gnnscale train`` checks ``--fanouts`` before it starts
any worker without importing torch.
"""
from __future__ import annotations

from typing import Sequence

from gnnscale.errors import SamplerError


def check_fanouts(fanouts: Sequence[int], num_layers: int | None = None) -> list[int]:
    """Validate fanouts: positive ints or -1 (all neighbors), one per layer."""
    out = []
    for f in fanouts:
        if isinstance(f, bool) or int(f) != f or (int(f) < 1 and int(f) != -1):
            raise SamplerError(
                f"fanouts must be positive integers or -1 (all neighbors); found {list(fanouts)}. "
                "Example: --fanouts 10,10 for a 2-layer model."
            )
        out.append(int(f))
    if not out:
        raise SamplerError("fanouts is empty: give one fanout per layer, e.g. --fanouts 10,10")
    if num_layers is not None and len(out) != num_layers:
        raise SamplerError(
            f"expected {num_layers} fanouts (one per model layer), found {len(out)}: {out}. "
            f"Give exactly {num_layers} comma-separated values, or change the number of layers."
        )
    return out
