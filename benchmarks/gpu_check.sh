#!/usr/bin/env bash
# The device path on one GPU, in under 8 minutes (issue 13):
#   1. the tests marked `gpu` (1 worker on CUDA against the CPU run's losses within 1e-4; the torch
#      sampling kernels on CUDA tensors draw what the numba kernels draw);
#   2. a products-scale generated graph (2.4M nodes, degree 25, 100 features, 47 classes, like
#      ogbn-products), 1 worker: epochs on CUDA beside the same epochs on the CPU (capped steps).
# A 2-worker NCCL run needs two GPUs; with one GPU it is out of reach.
#
#   bash benchmarks/gpu_check.sh [OUTDIR]      (OUTDIR default: $OUT or results/gpu_check)
#   GPU_CHECK_NODES=20000 bash benchmarks/gpu_check.sh /tmp/x    (a dry run of the script on a CPU machine)
#   bash benchmarks/gpu_check.sh --smoke [OUTDIR]   (2,000 nodes, 2 steps: checks that it runs)
set -euo pipefail
SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; shift; fi
cd "$(dirname "$0")/.."
OUTDIR="${1:-${OUT:-results/gpu_check}}"
mkdir -p "$OUTDIR"
WORK="${TMPDIR:-/tmp}/gnnscale_gpu_check"
mkdir -p "$WORK"
PY="${PYTHON:-python}"

"$PY" - <<'EOF'
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPUs {torch.cuda.device_count()}",
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "(no GPU: the gpu tests will skip)")
EOF

echo "== 1. tests marked gpu"
timeout 240 "$PY" -m pytest -q -m gpu tests/test_device.py 2>&1 | tee "$OUTDIR/gpu_tests.log" | tail -15

echo "== 2. products-scale generated graph: CUDA epoch beside CPU"
NODES="${GPU_CHECK_NODES:-2400000}"  # smaller for a dry run on a CPU machine
STEPS=30
if [ "$SMOKE" = 1 ]; then NODES=2000; STEPS=2; WORK="$(mktemp -d)"; fi
DATA="synthetic?num_nodes=$NODES&avg_degree=25&num_features=100&num_classes=47&train_frac=0.08&seed=0"
PARTS="$WORK/products-like-$NODES-p1"
if [ ! -f "$PARTS/meta.json" ]; then
  timeout 200 "$PY" -m gnnscale partition --dataset "$DATA" --parts 1 --method random --out "$PARTS"
fi
for dev in cuda cpu; do
  timeout 150 "$PY" -m gnnscale train --parts-dir "$PARTS" --workers 1 --device "$dev" --epochs 2 \
    --max-steps "$STEPS" --fanouts 15,10,5 --batch-size 1024 --hidden 256 --eval-every 0 --no-progress \
    --metrics "$OUTDIR/products_$dev.json" 2>&1 | grep -E "epoch|start-up|error" || true
done
"$PY" - "$OUTDIR" <<'EOF'
import json, os, sys
out = sys.argv[1]
rec = {}
for dev in ("cuda", "cpu"):
    p = os.path.join(out, f"products_{dev}.json")
    if os.path.exists(p):
        m = json.load(open(p))
        last = m["epochs"][-1]
        rec[dev] = {"epoch_seconds": last["epoch_seconds"], "steps": last["steps"], "loss": last["loss"],
                    "stage_seconds": last["stage_seconds_max_over_ranks"], "startup_seconds": m["startup_seconds"]}
if len(rec) == 2:
    rec["cpu_over_cuda"] = rec["cpu"]["epoch_seconds"] / rec["cuda"]["epoch_seconds"]
print(json.dumps(rec, indent=1))
json.dump(rec, open(os.path.join(out, "gpu_check.json"), "w"), indent=1)
EOF
