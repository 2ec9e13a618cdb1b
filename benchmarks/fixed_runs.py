"""The fixed runs whose final weights must not change when a change is only a refactor or speed.

Each run trains Cora (2 METIS parts, the public split) through ``gnnscale train`` with fixed
seeds and records ``final_weights_sha256`` from its metrics file. ``--vs-checkout DIR`` runs the
same list with another checkout of gnnscale (e.g. ``git worktree add ../old REV``) and prints
both hashes side by side, with ``equal`` per run. Runs (issue 26's list):

* data parallel, 2 workers, exact / historical (``--halo-features fetch``) / local exchange, presample
  cache, ``--pipeline``
* the layer pipeline, D = 2 x K = 2, GPipe and 1F1B
* chunk pipelining, K = 4 stages over 4 chunks (GCNII, 4 layers), halo gradients on
* a resumed run: 2 epochs of 4 with checkpoints, then ``--resume`` to the end
* typed graphs (2 METIS parts each, ``rel:sage``, 2 workers): ACM (every type with features) and
  a 3,000-node ``synthetic-mag`` (featureless types: learned embeddings sharded by owner), exact
  and historical exchange

Usage::

    python benchmarks/fixed_runs.py --json results/fixed_runs.json
    git worktree add /tmp/old 4b204db && python benchmarks/fixed_runs.py --vs-checkout /tmp/old
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED, write_json  # noqa: E402
from epoch import checkout_env  # noqa: E402

COMMON = ["--epochs", "4", "--hidden", "32", "--seed", "3", "--eval-every", "0", "--no-progress", "--device", "cpu",
          "--threads", "1", "--timeout", "120"]
SAMPLED = ["--batch-size", "32", "--fanouts", "5,5"]
CACHE = [*SAMPLED, "--cache-policy", "presample", "--cache-size", "20%", "--pipeline"]
RUNS: dict[str, list[str]] = {
    "dp_exact_cache_pipeline": ["--workers", "2", "--exchange", "exact", *CACHE],
    "dp_historical_cache_pipeline": ["--workers", "2", "--exchange", "historical", "--halo-features", "fetch",
                                     *CACHE],
    "dp_local_cache_pipeline": ["--workers", "2", "--exchange", "local", *CACHE],
    "layer_pipeline_2x2_gpipe": ["--workers", "4", "--pipeline-stages", "2", "--micro-batches", "2",
                                 "--schedule", "gpipe", *SAMPLED],
    "layer_pipeline_2x2_1f1b": ["--workers", "4", "--pipeline-stages", "2", "--micro-batches", "2",
                                "--schedule", "1f1b", *SAMPLED],
    "chunks_k4_halo_gradients": ["--chunks", "--pipeline-stages", "4", "--workers", "4", "--layer", "gcnii",
                                 "--num-layers", "4", "--halo-gradients"],
}
RESUMED = ["--workers", "2", "--exchange", "exact", *SAMPLED]
TYPED = ["--workers", "2", "--layer", "rel:sage", *SAMPLED]
#: The typed runs: {name: (dataset, its arguments)}; each dataset is cut into 2 parts once.
TYPED_RUNS: dict[str, tuple[str, list[str]]] = {
    "typed_acm_exact": ("acm", [*TYPED, "--exchange", "exact"]),
    "typed_acm_historical": ("acm", [*TYPED, "--exchange", "historical"]),
    "typed_mag_embeddings_exact": ("mag", [*TYPED, "--exchange", "exact"]),
}


# Run in a checkout whose pipelines wrote no --metrics file (before the one engine): the CLI's
# run again with its launcher captured, the stages' parameters merged in stage order (a layer
# lives on one stage, chunk stages share the encoder; pipeline 0's stages, replicas being equal)
# and hashed as final_weights_sha256 hashes the whole model's parameters.
_STAGE_DIGEST = """
import hashlib, json, sys
import gnnscale.launch as launch
from gnnscale.cli import main
got = {}
real = launch.launch_local
def capture(*a, **k):
    got["results"] = real(*a, **k)
    return got["results"]
launch.launch_local = capture
rc = main(sys.argv[1:])
results = [r for r in got["results"] if r.get("pipeline", 0) == 0]
merged = {}  # stage order: the whole model's order (a chunk stage also holds the shared encoder)
for r in sorted(results, key=lambda r: r.get("stage", r.get("layers"))):
    merged.update(r["state"])
h = hashlib.sha256()
for v in merged.values():
    h.update(v.detach().cpu().numpy().tobytes())
print("DIGEST", h.hexdigest())
"""


def _train(args: list[str], metrics: str, env: dict | None, cwd: str) -> dict:
    cmd = [sys.executable, "-m", "gnnscale", "train", *COMMON, *args, "--metrics", metrics]
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=900)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}")
    if not os.path.exists(metrics) or "final_weights_sha256" not in json.load(open(metrics)):
        # a pipeline of a checkout before the one engine: no metrics file, or no hash in it
        r = subprocess.run([sys.executable, "-c", _STAGE_DIGEST, "train", *COMMON, *args], env=env, cwd=cwd,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        digest = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("DIGEST ")]
        if r.returncode or not digest:
            raise SystemExit(f"the stages' digest of {' '.join(args)} failed:\n{r.stdout[-3000:]}")
        return {"final_weights_sha256": digest[0], "from": "the stages' parameters (no metrics file)"}
    return json.load(open(metrics))


def run_all(parts: dict[int, str], work: str, env: dict | None, cwd: str, side: str,
            only: set | None = None) -> dict[str, str]:
    """``{run name: final_weights_sha256}`` of every fixed run (or those in ``only``), this side's checkout."""
    out: dict[str, str] = {}
    for name, args in RUNS.items():
        if only and name not in only:
            continue
        p = 4 if "chunks" in name else 2
        m = _train(["--parts-dir", parts[p], *args], os.path.join(work, f"{side}-{name}.json"), env, cwd)
        out[name] = m["final_weights_sha256"]
        print(f"[{side}] {name}: {out[name]}", flush=True)
    for name, (ds, args) in TYPED_RUNS.items():
        if only and name not in only:
            continue
        m = _train(["--parts-dir", parts[ds], *args], os.path.join(work, f"{side}-{name}.json"), env, cwd)
        out[name] = m["final_weights_sha256"]
        print(f"[{side}] {name}: {out[name]}", flush=True)
    if only and "dp_exact_resumed" not in only:
        return out
    ck = os.path.join(work, f"{side}-ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    base = ["--parts-dir", parts[2], *RESUMED, "--checkpoint-dir", ck]
    _train([*base, "--max-steps", "6"], os.path.join(work, f"{side}-resume-a.json"), env, cwd)
    m = _train([*base, "--resume"], os.path.join(work, f"{side}-resume-b.json"), env, cwd)
    ref = _train(["--parts-dir", parts[2], *RESUMED], os.path.join(work, f"{side}-resume-ref.json"), env, cwd)
    out["dp_exact_resumed"] = m["final_weights_sha256"]
    out["dp_exact_uninterrupted"] = ref["final_weights_sha256"]
    print(f"[{side}] dp_exact_resumed: {out['dp_exact_resumed']} (uninterrupted "
          f"{'equal' if out['dp_exact_resumed'] == out['dp_exact_uninterrupted'] else 'DIFFERENT'})", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vs-checkout", metavar="DIR", help="also run these runs with this other checkout of gnnscale")
    ap.add_argument("--root", default=str(SHARED / "planetoid" / "raw"), help="Planetoid raw files")
    ap.add_argument("--acm", default=str(SHARED / "acm"), help="ACM's folder (typed runs)")
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the hashes here")
    ap.add_argument("--runs", default=None, help="only these runs (comma-separated names; default: all)")
    ap.add_argument("--smoke", action="store_true", help="the first run only (dp_exact_cache_pipeline)")
    args = ap.parse_args()
    if args.smoke:
        args.runs = args.runs or next(iter(RUNS))
    work = args.workdir or tempfile.mkdtemp(prefix="gnnscale-fixed-")
    os.makedirs(work, exist_ok=True)
    only = set(args.runs.split(",")) if args.runs else None
    # the folders the selected runs read (--smoke's one run: Cora's 2 parts only, not the 3 others)
    needed = {4 if "chunks" in name else 2 for name in RUNS if not only or name in only}
    needed |= {ds for name, (ds, _) in TYPED_RUNS.items() if not only or name in only}
    if not only or "dp_exact_resumed" in only:
        needed.add(2)
    parts = {}
    for p in (2, 4):  # partitioned once, by this checkout, so both sides read the same folders
        parts[p] = os.path.join(work, f"cora{p}")
        if p in needed and not os.path.exists(os.path.join(parts[p], "meta.json")):
            subprocess.run([sys.executable, "-m", "gnnscale", "partition", "--dataset", "planetoid:cora", "--root",
                            args.root, "--parts", str(p), "--out", parts[p]], check=True,
                           stdout=subprocess.DEVNULL)
    typed = {"acm": f"acm:{args.acm}?split=20", "mag": "synthetic-mag?num_nodes=3000"}
    for key, dataset in typed.items():
        parts[key] = os.path.join(work, f"{key}2")
        if key in needed and not os.path.exists(os.path.join(parts[key], "meta.json")):
            subprocess.run([sys.executable, "-m", "gnnscale", "partition", "--dataset", dataset, "--parts", "2",
                            "--out", parts[key]], check=True, stdout=subprocess.DEVNULL)
    here = os.path.join(work, "here")
    os.makedirs(here, exist_ok=True)  # run from outside the checkout, as the other side is
    result = {"this": run_all(parts, work, None, here, "this", only)}
    if args.vs_checkout:
        env, cwd = checkout_env(args.vs_checkout, work)
        result["other"] = run_all(parts, work, env, cwd, "other", only)
        result["baseline"] = os.path.abspath(args.vs_checkout)
        print(f"\n{'run':34s} {'this checkout':18s} {'the other':18s} equal")
        for name, digest in result["this"].items():
            theirs = result["other"].get(name, "")
            print(f"{name:34s} {digest[:16]:18s} {theirs[:16]:18s} {digest == theirs}")
        result["all_equal"] = result["this"] == result["other"]
        print(f"all equal: {result['all_equal']}")
    write_json(args.json, result)


if __name__ == "__main__":
    main()
