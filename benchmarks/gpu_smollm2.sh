#!/usr/bin/env bash
# SmolLM2-135M + LoRA on Kuhn on one GPU: the CPU config (examples/smollm2_kuhn.yaml) run on
# cuda, the runs behind benchmarks/results/smollm2-gpu/ (summarised by benchmarks/smollm2_gpu.py).
# Needs a CUDA build of torch and the package installed with its agent extra; on an H200
# the five runs of the first block shared the GPU and took 224-330 s.
# Usage: bash benchmarks/gpu_smollm2.sh [output folder]
set -uo pipefail
out="${1:-runs/smollm2-gpu}"
mkdir -p "$out"
train() {  # name, time limit in seconds, further `mage train` arguments
  local name=$1 limit=$2; shift 2
  # the config as it was for these runs: adapters on every layer, alpha 32, 8 x 8, 40 iterations
  timeout "$limit" mage train --config examples/smollm2_kuhn.yaml --device cuda --threads 2 --quiet \
    --lora-top-layers 0 --lora-alpha 32 --groups-per-iteration 8 --iterations 40 --output-dir "$out/$name" "$@" > "$out/$name.log" 2>&1
  echo "$name rc=$?" >> "$out/walls.txt"
}
# the config as it stands, three seeds, each evaluated untrained and trained; and 16 x 8 copies
train s0 330 --seed 0 & train s1 330 --seed 1 & train s2 330 --seed 2 &
train big-s0 330 --seed 0 --groups-per-iteration 16 --iterations 60 &
wait
# longer runs without evaluation: the config's entropy weight and 0.1
long() { train "long-$1" 250 --eval-meta-episodes 0 --iterations 150 --checkpoint-every 1000 --threads 4 "${@:2}"; }
long ent03 --seed 0 & long ent10 --seed 0 --entropy-coef 0.1 & long ent10-s1 --seed 1 --entropy-coef 0.1 &
wait
cat "$out/walls.txt"
