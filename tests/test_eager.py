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


def test_the_default_job_prints_no_ddp_warning(tmp_path):
    # DDP searches for unused parameters only for models that may have some (the zoo's do not).
    # DDP's own constructor reads one compiler setting: answered without importing the compiler.
    met, text = _job(tmp_path, 2)
    assert "find_unused_parameters" not in text
    assert met["process"]["torch_dynamo_imported_by_rank"] == [False, False]
