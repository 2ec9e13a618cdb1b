"""Workers keep torch._dynamo off their start-up path (issue 30), with identical updates."""
import json
import subprocess
import sys

SCRIPT = r"""
import json, sys
from gnnscale.process.eager import adam, stay_eager
import torch
assert stay_eager()
torch.manual_seed(0)
a, b = torch.nn.Linear(6, 4), torch.nn.Linear(6, 4)
b.load_state_dict(a.state_dict())
oa, ob = adam(a.parameters(), 0.01, 0.1), torch.optim.Adam(b.parameters(), lr=0.01, weight_decay=0.1)
first = None
for i in range(6):
    x = torch.randn(16, 6)
    for m, o in ((a, oa), (b, ob)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    if first is None:
        first = "torch._dynamo" in sys.modules  # only the plain Adam imported it, after the eager one stepped
oa.load_state_dict(oa.state_dict())
print(json.dumps({"equal": all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters())),
                  "type": type(oa).__name__}))
"""


def test_eager_adam_steps_like_torch_adam():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"equal": True, "type": "_EagerAdam"}


def _job(tmp_path, workers: int) -> tuple[dict, str]:
    m = tmp_path / f"m{workers}.json"
    out = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--epochs", "1", "--no-progress", "--eval-every",
                          "0", "--workers", str(workers), "--metrics", str(m), "--cache-dir", str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(m.read_text()), out.stderr + out.stdout


def test_a_one_worker_job_never_imports_the_compiler(tmp_path):
    met, _ = _job(tmp_path, 1)
    assert met["process"]["torch_dynamo_imported_by_rank"] == [False]
    assert met["process"]["heap"] == "kept"  # process/memory.py: freed memory reused, not faulted in again


def test_the_default_job_prints_no_ddp_warning(tmp_path):
    # DDP searches for unused parameters only for models that may have some (the zoo's do not).
    # DDP's own constructor reads one compiler setting: answered without importing the compiler.
    met, text = _job(tmp_path, 2)
    assert "find_unused_parameters" not in text
    assert met["process"]["torch_dynamo_imported_by_rank"] == [False, False]
    # each epoch's CPU seconds by rank and their sum (what benchmarks/epoch.py --vs-checkout compares beside wall)
    ep = met["epochs"][0]
    assert len(ep["epoch_cpu_seconds_by_rank"]) == 2 and min(ep["epoch_cpu_seconds_by_rank"]) > 0
    assert ep["epoch_cpu_seconds"] == sum(ep["epoch_cpu_seconds_by_rank"])


DDP_SCRIPT = r"""
import json, os, sys, types
import torch, torch.distributed as dist
from gnnscale.process import eager
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
dist.init_process_group("gloo", rank=0, world_size=1)
assert eager.stay_eager()
real = types.SimpleNamespace
if sys.argv[2] == "short":  # a stand-in without what the constructor reads: torch's own path
    types.SimpleNamespace = lambda **kw: real()
model = eager.ddp(torch.nn.Linear(3, 2))
types.SimpleNamespace = real
model(torch.ones(4, 3)).sum().backward()
print(json.dumps({"type": type(model).__name__, "dynamo": "torch._dynamo" in sys.modules,
                  "stand_in_left": getattr(sys.modules.get("torch._dynamo"), "__file__", None) is None
                  and "torch._dynamo" in sys.modules}), flush=True)
dist.destroy_process_group()
# what is checked is printed: leave without the interpreter's teardown, where a thread of torch's still
# joinable at exit aborted the process once on a fresh clone ("terminate called without an active exception")
os._exit(0)
"""


def test_ddp_is_built_without_the_compiler_and_falls_back_when_the_stand_in_falls_short():
    from gnnscale.process.launch import find_free_port

    got = {}
    for case in ("stand-in", "short"):
        out = subprocess.run([sys.executable, "-c", DDP_SCRIPT, str(find_free_port()), case], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        got[case] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["stand-in"] == {"type": "DistributedDataParallel", "dynamo": False, "stand_in_left": False}
    # the constructor found no get_optimize_ddp_mode: DDP built as torch builds it (importing the compiler)
    assert got["short"] == {"type": "DistributedDataParallel", "dynamo": True, "stand_in_left": False}
