"""Fan-out lists (neighbors sampled per layer): their validation.

Torch-free, so that the launcher of ``gnnscale train`` checks ``--fanouts`` before it starts
any worker without importing torch.
"""
from __future__ import annotations

from typing import Mapping, Sequence

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


def typed_fanouts(fanouts: Sequence[int], relations: Sequence[str], num_layers: int | None = None,
                  per_relation: Mapping[str, Sequence[int]] | None = None) -> list[list[int]]:
    """Fan-outs per hop and relation of a typed graph, int [H][R] (torch-free).

    Args:
        fanouts: the fan-outs of every relation that ``per_relation`` does not name.
        relations: the R relation names in relation-id order.
        num_layers: when given, the number of hops required.
        per_relation: ``{relation name: fan-outs}`` for some relations, each as many hops as
            ``fanouts`` (``--relation-fanouts``); a name the graph does not have is an error.
    """
    base = check_fanouts(fanouts, num_layers)
    per_relation = dict(per_relation or {})
    unknown = sorted(set(per_relation) - set(relations))
    if unknown:
        raise SamplerError(f"--relation-fanouts names relation(s) {unknown} that the graph does not have; its "
                           f"relations are {list(relations)}: use these names")
    lists = []
    for r in relations:
        got = per_relation.get(r, base)
        if not isinstance(got, (list, tuple)):
            raise SamplerError(f"--relation-fanouts: expected a list of fan-outs for relation {r!r}, found {got!r}; "
                               f"e.g. {{\"{r}\": {list(base)}}}")
        lists.append(check_fanouts(got))
        if len(lists[-1]) != len(base):
            raise SamplerError(f"--relation-fanouts: relation {r!r} has {len(lists[-1])} fan-outs {lists[-1]}, but "
                               f"--fanouts gives {len(base)} hops {base}; give each relation as many hops")
    return [[lists[r][h] for r in range(len(relations))] for h in range(len(base))]
