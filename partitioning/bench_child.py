"""The child process of ``gnnscale bench-partition``: one method, its own seconds and peak memory.

``partition_in_child`` runs in a process forked from a ``forkserver`` that imported this module
once; importing it also loads what the partitioners load on first use (``scipy.sparse`` for the
symmetric CSR, the METIS library, ``torch_geometric.data`` to unpickle the graph), so a child's
seconds and memory are the method's, not the cost of those imports (and of a first call, see
``warm_up``).
"""
from __future__ import annotations

import time

import scipy.sparse  # noqa: F401 - loaded on first use by partitioning.graph
import torch_geometric.data  # noqa: F401 - the pickled graph's class

from gnnscale.errors import PartitionError
from gnnscale.partitioning.api import assign_parts, register_partitioner
from gnnscale.partitioning.metis import find_libmetis
from gnnscale.partitioning.strategies import BUILTIN_STRATEGIES
from gnnscale.partitioning.resources import ResourceMeter, current_rss_bytes, lifetime_peak_rss_bytes



def _tiny_graph():
    """A 4-node ring (both directions), every node a training node."""
    import torch

    ring = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    return torch_geometric.data.Data(edge_index=torch.cat([ring, ring.flip(0)], 1), num_nodes=4,
                                     train_mask=torch.ones(4, dtype=torch.bool))


def warm_up(methods=("random", "ldg", "fennel", "metis")) -> None:
    """Partition a 4-node ring with each built-in method (errors ignored: the real call names them).

    In the forkserver this runs every lazy import and set-up once. In a child it runs again for
    the one method measured: a forked child does not inherit the page-table entries of shared
    libraries' code, so its first call faults them in (2.6 MB on Cora for ``random``, 2.9 MB
    for ``ldg``, whatever the graph's size), which is not the method's memory.
    """
    tiny = _tiny_graph()
    for method in methods:
        if method not in BUILTIN_STRATEGIES:
            continue  # plug-ins and registered methods are not called twice
        try:
            assign_parts(tiny, 2, method=method)
        except Exception:  # noqa: BLE001 - e.g. no METIS library: the real call fails and says so
            pass


find_libmetis()  # cached: the library lookup runs once, in the forkserver
warm_up()


def reset_peak_rss() -> bool:
    """Set this process's peak RSS (``VmHWM``) to its current RSS; False where Linux does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def partition_in_child(conn, data_file: str, method: str, fn, num_parts: int, kwargs: dict) -> None:
    """The child's side: load the graph, reset the peak, partition, send (parts, meter) back.
    ``fn`` is the partitioner of a name registered in the parent (None for built-ins and plug-ins)."""
    try:
        import torch

        if fn is not None:
            register_partitioner(method, fn, overwrite=True)
        data = torch.load(data_file, weights_only=False)
        warm_up((method,))
        if reset_peak_rss():  # the kernel's high-water mark is this method's: exact, no sampling thread
            start = current_rss_bytes()
            t0 = time.perf_counter()
            parts = assign_parts(data, num_parts, method=method, **kwargs)
            seconds = time.perf_counter() - t0
            peak = max(lifetime_peak_rss_bytes(), current_rss_bytes())
            mem = {"seconds": seconds, "peak_rss_bytes": peak, "peak_rss_growth_bytes": max(0, peak - start),
                   "peak_rss_exact": True}
        else:  # pragma: no cover - not Linux
            with ResourceMeter() as meter:
                parts = assign_parts(data, num_parts, method=method, **kwargs)
            mem = meter.as_dict()
        conn.send(("ok", parts, mem))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, raised there
        try:
            conn.send(("error", exc))
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            conn.send(("error", PartitionError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()
