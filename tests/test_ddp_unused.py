"""DDP without its search for unused parameters (issue 44, item 6): models that may leave a
parameter without a gradient (a user's layer, typed models) get the gradients DDP's
``find_unused_parameters=True`` would give them, and no rank prints DDP's warning."""
import json
import os
import subprocess
import sys

SCRIPT = r"""
import json, os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c, self.d = (torch.nn.Linear(8, 8) for _ in range(4))

    def forward(self, x, use):
        h = self.a(x)
        for name in use:
            h = getattr(self, name)(h).relu()
        return h


# per step, the layers each rank uses: b on rank 0 only, then no rank uses b, then every rank; c never;
# d on rank 1 only (its bucket is ready on one rank and not on the other)
STEPS = [[("b",), ("d",)], [(), ()], [("b", "d"), ("b",)], [("b",), ("d",)]]


class Comm:  # the Communicator's all_reduce, on the default group
    def all_reduce(self, t, op, category):
        dist.all_reduce(t)
        return t


def run(rank, mode, port, q):
    from gnnscale.parallel.data_parallel import FullGradients

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    net = Net()
    # 1 KB buckets: every layer in a bucket of its own
    model = torch.nn.parallel.DistributedDataParallel(net, find_unused_parameters=mode == "search",
                                                      bucket_cap_mb=0.001)
    complete = FullGradients(list(net.parameters()), Comm()) if mode == "full" else None
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    grads = []
    for step, use in enumerate(STEPS):
        opt.zero_grad(set_to_none=True)
        model(torch.full((3, 8), float(rank + step + 1)), use[rank]).pow(2).sum().backward()
        if complete is not None:
            complete()
        grads.append([None if p.grad is None else p.grad.tolist() for p in net.parameters()])
        opt.step()
    q.put((rank, grads, [p.tolist() for p in net.parameters()]))
    dist.destroy_process_group()


if __name__ == "__main__":
    from gnnscale.process.launch import find_free_port

    ctx = mp.get_context("spawn")
    got = {}
    for mode in ("search", "full"):
        q = ctx.Queue()
        port = find_free_port()
        procs = [ctx.Process(target=run, args=(r, mode, port, q)) for r in range(2)]
        for p in procs:
            p.start()
        got[mode] = dict((r, (g, w)) for r, g, w in (q.get(timeout=120) for _ in procs))
        for p in procs:
            p.join(60)
    print(json.dumps(got))
"""


def test_full_gradients_equal_ddps_search_for_unused_parameters(tmp_path):
    script = tmp_path / "full.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    search, full = got["search"], got["full"]
    for rank in ("0", "1"):
        assert full[rank][0] == search[rank][0]  # every step's gradients, None where no rank used it
        assert full[rank][1] == search[rank][1]  # the weights after Adam's steps
    # step 1: no rank used b (params 2, 3): no gradient; c (4, 5) never has one; d was used by rank 1
    assert search["0"][0][1][2] is None and search["0"][0][0][4] is None and search["0"][0][0][6] is not None


LAYER = '''
import torch
from torch_geometric.nn import MessagePassing


class MeanConv(MessagePassing):
    def __init__(self, in_dim, out_dim):
        super().__init__(aggr="mean")
        self.lin = torch.nn.Linear(in_dim, out_dim)
        self.root = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index):
        x_src, x_dst = x
        return self.propagate(edge_index, x=(self.lin(x_src), None), size=(x_src.size(0), x_dst.size(0))) + \
            self.root(x_dst)

    def message(self, x_j):
        return x_j
'''


def _train(tmp_path, *args: str) -> tuple[dict, str]:
    m = tmp_path / "m.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    source = [] if "--parts-dir" in args else ["--cache-dir", str(tmp_path / "cache")]
    out = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--epochs", "1", "--no-progress", "--eval-every",
                          "0", "--workers", "2", "--metrics", str(m), *source, *args],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(m.read_text()), out.stderr + out.stdout


def test_a_custom_layer_prints_no_ddp_warning(tmp_path):
    (tmp_path / "mylayers.py").write_text(LAYER)
    met, text = _train(tmp_path, "--layer", "mylayers:MeanConv", "--max-steps", "3")
    assert "find_unused_parameters" not in text
    assert met["epochs"][0]["loss"] > 0


def test_rgcn_prints_no_ddp_warning(tmp_path, acm_partition):
    met, text = _train(tmp_path, "--parts-dir", acm_partition(2), "--layer", "rgcn", "--max-steps", "3",
                       "--batch-size", "64", "--hidden", "16")
    assert "find_unused_parameters" not in text
    assert met["epochs"][0]["loss"] > 0
