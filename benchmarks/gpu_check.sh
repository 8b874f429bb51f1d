#!/usr/bin/env bash
# One prepared GPU check, a few minutes on one GPU (needs a CUDA build of torch):
#   1. the hub-shaped model test (Qwen2 + ChatML, LoRA in bf16) on cuda;
#   2. a short default-recipe run on cuda (bf16 by dtype=auto), with its seconds per iteration;
#   3. with two or more GPUs, the same run data parallel under torchrun (NCCL).
# Usage: bash benchmarks/gpu_check.sh [output folder]
set -euo pipefail
out="${1:-runs/gpu_check}"
mkdir -p "$out"
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
MAGE_TEST_DEVICE=cuda python -m pytest -q tests/agent/test_hub_model.py
mage train --device cuda --iterations 20 --eval-meta-episodes 50 --output-dir "$out/single" --quiet
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -ge 2 ]; then
  torchrun --standalone --nproc-per-node 2 --no-python mage train --device cuda --iterations 20 \
    --eval-meta-episodes 50 --output-dir "$out/ddp" --quiet
fi
python - "$out" <<'PY'
import json, sys
from pathlib import Path
for run in sorted(Path(sys.argv[1]).iterdir()):
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    seconds = sum(m["seconds"] for m in lines[1:]) / max(len(lines) - 1, 1)
    print(f"{run.name}: {seconds:.3f} s/iteration after the first, final R1 {lines[-1]['return_ep1']:+.3f} "
          f"R3 {lines[-1]['return_ep3']:+.3f}, {lines[-1]['meta_episodes']} meta-episodes per iteration")
PY
