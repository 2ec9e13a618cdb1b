"""Tests of gnnscale.tasks.inference.halo_inference in one process (one part owns the whole graph).

With one part there is no halo: the feature store and the halo exchange are stand-ins that hold
no rows (``halo_inference`` asks them for zero halo rows and gets zero rows back), so the
function runs as it does on every rank, without a process group.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch_geometric.utils import coalesce, remove_self_loops

import gnnscale.tasks.inference as inference
from gnnscale.tasks.inference import halo_inference
from gnnscale.nn.models import GNN
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.local import NeighborSampler


def one_part(n: int = 60, m: int = 300, f: int = 6, seed: int = 0):
    """A directed random graph as CSC, its features, and the stand-ins of a 1-part world."""
    g = torch.Generator().manual_seed(seed)
    ei, _ = remove_self_loops(torch.randint(0, n, (2, m), generator=g))
    src, dst = coalesce(ei, num_nodes=n)
    deg = torch.bincount(dst, minlength=n)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(deg, 0)])
    indices = src[torch.argsort(dst, stable=True)]
    x = torch.randn(n, f, generator=g)
    exchanged = []

    def exchange_layer(layer: int, h_own: torch.Tensor, step: int) -> torch.Tensor:
        exchanged.append((layer, step))
        return h_own[:0]  # no halo rows

    halo = SimpleNamespace(num_owned=n, num_halo=0, halo_ids=torch.zeros(0, dtype=torch.int64),
                           local_slice=lambda a, b: indices[a:b], offset=0, exchange_layer=exchange_layer)
    features = SimpleNamespace(fetch=lambda ids: x[ids])
    return indptr, indices, deg, x, halo, features, exchanged


@pytest.mark.parametrize("backend", [None, "torch", "numba", "auto"])
def test_layerwise_inference_uses_the_given_sampler_backend(backend, monkeypatch) -> None:
    """``backend=`` reaches the Kernels that relabel the neighborhoods (default "auto"), and the
    logits equal the model on full-neighborhood blocks of every node, whatever the backend."""
    indptr, indices, deg, x, halo, features, exchanged = one_part()
    made = []

    def recording_kernels(num_nodes, device, backend_arg):
        made.append(backend_arg)
        return Kernels(num_nodes, device, backend_arg)

    monkeypatch.setattr(inference, "Kernels", recording_kernels)
    torch.manual_seed(0)
    model = GNN(x.size(1), 8, 3, num_layers=2, layer="gcn", dropout=0.0).eval()
    kw = {} if backend is None else {"backend": backend}
    got = halo_inference(model, indptr, x, features, halo, step=5, chunk_edges=64, node_degree=deg, **kw)
    assert made == ["auto" if backend is None else backend]
    assert exchanged == [(1, 5)]
    blocks = NeighborSampler(indptr, indices, [-1, -1], backend="torch").sample(torch.arange(x.size(0))).blocks
    with torch.no_grad():
        want = model(x[blocks[0].src_ids], blocks, node_degree=deg)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_layerwise_inference_rejects_an_unknown_backend() -> None:
    indptr, _, deg, x, halo, features, _ = one_part()
    model = GNN(x.size(1), 8, 3, num_layers=2, layer="gcn", dropout=0.0).eval()
    with pytest.raises(ValueError, match=r"backend must be 'auto', 'numba' or 'torch', found 'cuda'"):
        halo_inference(model, indptr, x, features, halo, step=0, node_degree=deg, backend="cuda")


def test_a_table_over_its_budget_is_mapped_on_a_deleted_file() -> None:
    """layer_table: within the budget an ordinary tensor; over it, float32 rows on a temporary file
    that is already deleted (nothing left on disk after a crash), writable and readable as any."""
    from pathlib import Path

    from gnnscale.tasks.inference import layer_table

    def mapped() -> list[str]:
        return [line for line in Path("/proc/self/maps").read_text().splitlines() if "gnnscale-layer-" in line]

    before = len(mapped())
    small = layer_table(1000, 8, budget=32_000)
    assert small.shape == (1000, 8) and small.dtype == torch.float32 and len(mapped()) == before
    big = layer_table(1000, 8, budget=31_999)
    big[:] = torch.arange(8000, dtype=torch.float32).view(1000, 8)
    assert torch.equal(big[999], torch.arange(7992, 8000, dtype=torch.float32))
    now = mapped()
    assert len(now) == before + 1 and now[-1].endswith("(deleted)")
    assert layer_table(1000, 8, budget=None).shape == (1000, 8) and layer_table(0, 8, budget=0).shape == (0, 8)


def test_table_budget_is_a_quarter_of_this_workers_share_of_the_available_memory(monkeypatch) -> None:
    """table_budget_bytes: MemAvailable / local workers / 4 (two tables live at a time besides the
    slices), the local workers from LOCAL_WORLD_SIZE (WORLD_SIZE counts every host's); None where
    /proc/meminfo cannot be read. MemAvailable mocked at 16 GiB."""
    import builtins
    import io

    import gnnscale.partitioning.resources as resources

    meminfo = b"MemTotal:       33554432 kB\nMemFree:         1048576 kB\nMemAvailable:   16777216 kB\n"
    real_open = builtins.open

    def fake_open(path, *args, **kwargs):
        if str(path) == "/proc/meminfo":
            if meminfo is None:
                raise PermissionError(13, "Permission denied", path)
            return io.BytesIO(meminfo)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(resources, "open", fake_open, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "8")  # two hosts of 4 workers, or 8 of 1: only the local count matters
    got = {}
    for local in (1, 4):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
        got[local] = inference.table_budget_bytes()
    assert got == {1: 4 << 30, 4: 1 << 30}
    monkeypatch.delenv("LOCAL_WORLD_SIZE")  # launched without it: WORLD_SIZE workers on this host
    assert inference.table_budget_bytes() == 512 << 20
    meminfo = None
    assert inference.table_budget_bytes() is None
