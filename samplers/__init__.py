"""Neighbor samplers: local (one process) and distributed (owners sample their nodes)."""
from gnnscale.samplers.block import Block, MiniBatch
from gnnscale.samplers.local import NeighborSampler, SamplingKeys, check_fanouts
from gnnscale.samplers.distributed import DistNeighborSampler

__all__ = ["Block", "MiniBatch", "NeighborSampler", "DistNeighborSampler", "SamplingKeys", "check_fanouts"]
