"""Temporal graphs: timestamped events as a graph whose edges carry times (docs/temporal.md).

Every reader gives the contract ``Data`` plus ``edge_time`` int64 [E] (one time per column of
``edge_index``): repeated pairs are kept (each is an event), self loops too (an event is an
event); node features are a constant column unless the input has some.

Sources:

* ``events:PATH``: a text file of events ``src dst t`` (whitespace-separated, one per line, ``#``
  comments; SNAP's temporal graphs such as CollegeMsg); node ids may be any integers: they are
  renumbered 0..N-1 in ascending order.
* ``jodie:PATH``: JODIE's CSV (``user,item,timestamp,state_label,f1,...``, a header line): a
  bipartite graph, users 0..U-1 then items U..U+I-1, edge features from the feature columns.
* ``dir:PATH`` with ``edge_time.npy`` (int or float [E], row i = edge i): see
  :mod:`gnnscale.datasets.directory`.
* a PyG ``Data`` with ``edge_time`` [E] or node ``time`` [N] (an edge then takes its source's
  time: PyG's node-time rule), or ``TemporalData`` (src, dst, t, msg): :func:`from_pyg`.

Bad inputs are one line each: times of another length than the edges, NaN, fractional times,
unsorted times where ``sorted=true`` claims order.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._options import Option
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

OPTIONS: dict[str, Option] = {
    "undirected": Option(bool, False, "also store every event reversed (same time)"),
    "sorted": Option(bool, False, "the file claims its events are in time order: checked, one line if not"),
}
HELP = (
    "events:PATH\n"
    "    A text file of timestamped events 'src dst t' (one per line, whitespace-separated, as SNAP's\n"
    "    CollegeMsg): a temporal graph (edge_time int64 [E], repeated pairs kept, ids renumbered 0..N-1).\n"
    "jodie:PATH\n"
    "    JODIE's CSV (user,item,timestamp,state_label,features...): users then items, edge features and\n"
    "    times; docs/temporal.md. Options (both):"
)


def check_times(t, num_edges: int, where: str, claimed_sorted: bool = False) -> torch.Tensor:
    """int64 [num_edges] times: one line for another length, NaN, fractions or broken order."""
    from gnnscale.samplers.temporal import check_edge_time

    return check_edge_time(t, num_edges, where, claimed_sorted)


def temporal_data(src: np.ndarray, dst: np.ndarray, t: torch.Tensor, num_nodes: int, name: str, where: str,
                  edge_attr: np.ndarray | None = None, undirected: bool = False,
                  x: np.ndarray | None = None) -> Data:
    """The contract Data of a temporal graph (``edge_time``; no labels, every node in no mask)."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size and (src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise DatasetError(f"expected node ids in [0, {num_nodes}) in {where}, found "
                           f"[{min(src.min(), dst.min())}, {max(src.max(), dst.max())}]; fix the ids")
    t = t.to(torch.int64)
    if undirected:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        t = torch.cat([t, t])
        edge_attr = None if edge_attr is None else np.concatenate([edge_attr, edge_attr])
    n = int(num_nodes)
    data = Data(
        x=torch.ones(n, 1) if x is None else torch.as_tensor(x, dtype=torch.float32),
        y=torch.zeros(n, dtype=torch.int64),
        edge_index=torch.from_numpy(np.stack([src, dst])),
        train_mask=torch.zeros(n, dtype=torch.bool),
        val_mask=torch.zeros(n, dtype=torch.bool),
        test_mask=torch.zeros(n, dtype=torch.bool),
        num_nodes=n,
    )
    data.edge_time = t
    data.num_classes = 1
    data.name = name
    if edge_attr is not None:
        data.edge_attr = torch.as_tensor(edge_attr, dtype=torch.float32)
    logger.info("loaded %s: %d nodes, %d events, times %s .. %s", name, n, src.size,
                int(t.min()) if t.numel() else "-", int(t.max()) if t.numel() else "-")
    return data


def read_events(path: str | Path, name: str | None = None, sorted: bool = False, undirected: bool = False) -> Data:
    """``src dst t`` lines (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"expected an events file (lines 'src dst t') at {path}, found "
                           f"{'a folder' if path.exists() else 'nothing'}; pass events:<file>")
    try:
        raw = np.loadtxt(path, dtype=np.float64, comments="#", ndmin=2)
    except ValueError as err:
        raise DatasetError(f"expected lines of three numbers 'src dst t' in {path}, found {str(err).splitlines()[0]}; "
                           "fix the file") from None
    if raw.shape[1] < 3:
        raise DatasetError(f"expected three columns 'src dst t' in {path}, found {raw.shape[1]}; add the times")
    ids = raw[:, :2]
    if not np.array_equal(ids, np.floor(ids)) or not np.isfinite(ids).all():
        raise DatasetError(f"expected integer node ids in the first two columns of {path}; fix the ids")
    uniq, inv = np.unique(ids.astype(np.int64), return_inverse=True)
    inv = inv.reshape(-1, 2)
    t = check_times(raw[:, 2], raw.shape[0], f"the third column of {path}", sorted)
    return temporal_data(inv[:, 0], inv[:, 1], t, uniq.shape[0], name or f"events:{path}", str(path),
                         undirected=undirected)


def read_jodie(path: str | Path, name: str | None = None, sorted: bool = False, undirected: bool = False) -> Data:
    """JODIE's CSV: ``user,item,timestamp,state_label,features...`` with a header line."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"expected JODIE's CSV (user,item,timestamp,state_label,features...) at {path}, found "
                           f"{'a folder' if path.exists() else 'nothing'}; pass jodie:<file>")
    try:
        raw = np.loadtxt(path, dtype=np.float64, delimiter=",", skiprows=1, ndmin=2)
    except ValueError as err:
        raise DatasetError(f"expected numeric CSV rows user,item,timestamp,state_label,... in {path}, found "
                           f"{str(err).splitlines()[0]}; fix the file") from None
    if raw.shape[1] < 4:
        raise DatasetError(f"expected at least 4 columns (user,item,timestamp,state_label) in {path}, found "
                           f"{raw.shape[1]}")
    user, item = raw[:, 0].astype(np.int64), raw[:, 1].astype(np.int64)
    num_users = int(user.max()) + 1 if user.size else 0
    num_items = int(item.max()) + 1 if item.size else 0
    t = check_times(raw[:, 2], raw.shape[0], f"the timestamp column of {path}", sorted)
    attr = raw[:, 4:].astype(np.float32) if raw.shape[1] > 4 else None
    data = temporal_data(user, item + num_users, t, num_users + num_items, name or f"jodie:{path}", str(path),
                         edge_attr=attr, undirected=undirected)
    data.state_label = torch.from_numpy(raw[:, 3].astype(np.int64))
    data.num_users = num_users
    return data


def is_temporal(data) -> bool:
    """True for PyG's ``TemporalData`` and a ``Data`` with ``edge_time`` (or node ``time``)."""
    from torch_geometric.data import TemporalData

    if isinstance(data, TemporalData):
        return True
    return isinstance(data, Data) and ("edge_time" in data.keys() or "time" in data.keys())


def from_pyg(data, name: str = "pyg") -> Data:
    """A temporal contract Data from PyG's ``TemporalData`` (src, dst, t, msg) or a ``Data`` with
    ``edge_time`` [E] or node ``time`` [N] (edges then take their source's time)."""
    from torch_geometric.data import TemporalData

    if isinstance(data, TemporalData):
        src, dst = data.src.numpy(), data.dst.numpy()
        n = int(max(src.max(), dst.max()) + 1) if src.size else 0
        t = check_times(data.t, src.shape[0], "TemporalData.t")
        msg = getattr(data, "msg", None)
        return temporal_data(src, dst, t, n, name, "TemporalData", edge_attr=None if msg is None else msg.numpy())
    ei = data.edge_index
    e = int(ei.shape[1])
    if getattr(data, "edge_time", None) is not None:
        t = check_times(data.edge_time, e, "data.edge_time")
    elif getattr(data, "time", None) is not None:
        node_t = check_times(data.time, int(data.num_nodes), "data.time (one time per node)")
        t = node_t[ei[0]]  # PyG's node-time rule: a neighbour is a candidate when its time is before the seed's
    else:
        raise DatasetError("expected a temporal graph: data.edge_time [E], data.time [N] or TemporalData, found "
                           "none of them; add the times")
    x = getattr(data, "x", None)
    out = temporal_data(ei[0].numpy(), ei[1].numpy(), t, int(data.num_nodes), name, "Data",
                         edge_attr=None if getattr(data, "edge_attr", None) is None else data.edge_attr.numpy(),
                         x=None if x is None or x.dim() != 2 else x.numpy())
    if getattr(data, "edge_time", None) is None:
        out.time_source = "node time (an edge takes its source's time)"
    return out


def generate_temporal_synthetic(num_nodes: int = 400, num_events: int = 20000, span: int = 100_000,
                                periodic: float = 0.5, bursty: float = 0.2, seed: int = 0) -> Data:
    """A temporal graph whose signal is in time (docs/temporal.md), for tests and the leak detector.

    - ``periodic`` of the events: recurring pairs, each firing every ``period`` time units (its own
      period and phase, a small jitter): a pair's past predicts its next event;
    - ``bursty``: bursts, a pair firing many times in a short stretch then going quiet;
    - the rest: noise from a drifting popularity (destinations' weights move with time), so
      "predict a pair seen long ago" decays and recency matters.

    A time-aware model can learn "this pair fired recently / is due"; a time-blind sampler that
    lets the scored event itself (or later ones) into its neighbourhoods sees the answer: the
    inflated score is the leak. Returns the temporal contract Data (events sorted by time)."""
    g = np.random.default_rng(seed)
    n_per = int(num_events * periodic)
    n_burst = int(num_events * bursty)
    n_noise = num_events - n_per - n_burst
    pairs = max(1, n_per // 40)  # about 40 firings per recurring pair
    ps, pd = g.integers(0, num_nodes, pairs), g.integers(0, num_nodes, pairs)
    period = g.integers(span // 80, span // 20, pairs)
    phase = g.integers(0, span // 20, pairs)
    which = g.integers(0, pairs, n_per)
    k = g.integers(0, np.maximum(1, (span - phase[which]) // period[which]))
    t_per = phase[which] + k * period[which] + g.integers(0, max(1, span // 2000), n_per)
    bursts = max(1, n_burst // 25)
    bs, bd = g.integers(0, num_nodes, bursts), g.integers(0, num_nodes, bursts)
    bstart = g.integers(0, span, bursts)
    bw = g.integers(0, bursts, n_burst)
    t_burst = bstart[bw] + g.integers(0, max(1, span // 200), n_burst)
    t_noise = g.integers(0, span, n_noise)
    centre = (t_noise / span * num_nodes).astype(np.int64)  # popularity drifts across the ids with time
    nd = (centre + g.normal(0, num_nodes / 20, n_noise).astype(np.int64)) % num_nodes
    src = np.concatenate([ps[which], bs[bw], g.integers(0, num_nodes, n_noise)])
    dst = np.concatenate([pd[which], bd[bw], nd])
    t = np.minimum(np.concatenate([t_per, t_burst, t_noise]), span - 1)
    keep = src != dst
    src, dst, t = src[keep], dst[keep], t[keep]
    order = np.argsort(t, kind="stable")
    return temporal_data(src[order], dst[order], torch.from_numpy(t[order]), num_nodes, "temporal-synthetic",
                         "generator")


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """``events:PATH`` / ``jodie:PATH`` (the scheme is ``name``'s prefix)."""
    path = Path(arg).expanduser()
    if not path.is_absolute() and root is not None:
        path = Path(root).expanduser() / path
    reader = read_jodie if name.lower().startswith("jodie:") else read_events
    return reader(path, name, sorted=options["sorted"], undirected=options["undirected"])
