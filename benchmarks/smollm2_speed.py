"""Seconds and peak memory of SmolLM2-135M + LoRA training iterations, by stage, side by side.

Each variant trains ``--iterations`` iterations of 3-hand Kuhn Poker meta-episodes against
the three training styles (the ``full`` prompt, memory, action tokens) in a process of its
own, so that its peak resident memory is its own. Stages: sampling (the sampler's generate
calls), the rest of the rollout (environment steps, prompts), scoring (the update's forward
passes) and the rest of the update (backward passes, optimizer steps). Memory is sampled
every 20 ms and reported as the peak resident set per stage. The machine may be shared:
compare the ratios, measured in one run, not the seconds.

Variants (``--variants``; NAME=VALUE settings in brackets): ``float32`` (the path before
this benchmark: float32 weights on one thread, the minibatch in one pass; 4 x 8
meta-episodes, which fits), ``auto`` (the defaults: bfloat16 frozen weights where the CPU has
native bfloat16 products, every core, micro-batches sized to memory; 4 x 8), ``auto-16``
(the defaults at ``mage train``'s 16 x 8) and ``top6-16`` (16 x 8 with the adapters on the
last 6 of 30 layers: the layers below run without autograd and the backward pass stops there,
and an update's second epoch starts above them, from the first epoch's kept output:
``top6-16-every-layer`` runs them in every epoch, as before that);
``free-text-16`` and ``reflection-16`` (16 x 8 with the SmolLM2 config's adapters, answering in
free text up to 8 tokens, or with action tokens and the model's own reflections up to 48).

Run: ``python benchmarks/smollm2_speed.py [--iterations 2] [--variants float32 auto auto-16 top6-16 free-text-16 reflection-16]
[--output benchmarks/results/smollm2-speed.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

#: A variant setting (not a config field): ``False`` runs every layer in every epoch of an update.
TRUNK_CACHE = "trunk_cache"
#: The benchmarked run: SmolLM2 with LoRA on the Kuhn meta-env, full prompt, action tokens, the
#: three training styles (examples/smollm2_kuhn.yaml's population).
BASE = {"name_or_path": "smollm2-135m", "lora": True, "prompt_style": "full", "eval_meta_episodes": 0,
        "tensorboard": False, "checkpoint_every": 0,
        "population": {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0}}
VARIANTS: dict[str, dict[str, Any]] = {
    "float32": {"dtype": "float32", "threads": 1, "micro_batch_tokens": 10**9, "groups_per_iteration": 4},
    "auto": {"groups_per_iteration": 4},
    "auto-16": {"groups_per_iteration": 16},
    "top6-16": {"groups_per_iteration": 16, "lora_top_layers": 6},
    # the same, every epoch running all 30 layers (no TrunkCache: the path before it)
    "top6-16-every-layer": {"groups_per_iteration": 16, "lora_top_layers": 6, TRUNK_CACHE: False},
    # the SmolLM2 benchmark's free-text and reflection variants (examples/smollm2_kuhn.yaml's LoRA)
    "free-text-16": {"groups_per_iteration": 16, "lora_top_layers": 6, "lora_alpha": 128, "action_tokens": False,
                     "max_new_tokens": 8},
    "reflection-16": {"groups_per_iteration": 16, "lora_top_layers": 6, "lora_alpha": 128, "reflection": True,
                      "max_new_tokens": 48},
}
STAGES = ("sampling", "rollout rest", "scoring", "update rest")


class Stages:
    """Seconds and peak resident memory (GiB) per stage, the stage set by :meth:`timed` wrappers."""

    def __init__(self) -> None:
        self.current = "setup"
        self.seconds: dict[str, float] = {}
        self.peak: dict[str, float] = {}
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            with open("/proc/self/statm") as handle:
                resident = int(handle.read().split()[1]) * page / 2**30
            self.peak[self.current] = max(self.peak.get(self.current, 0.0), resident)
            time.sleep(0.02)

    def timed(self, owner: Any, name: str, stage: str) -> None:
        """Count the calls of ``owner.name`` as ``stage`` (their time and memory)."""
        original: Callable = getattr(owner, name)

        def wrapper(*args, **kwargs):
            before, self.current = self.current, stage
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started
                self.current = before

        setattr(owner, name, wrapper)


def run_variant(name: str, iterations: int) -> dict[str, Any]:
    """Train variant ``name`` in this process; its per-iteration stages and metrics."""
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    stages = Stages()
    settings = dict(VARIANTS[name])
    trunk_cache = settings.pop(TRUNK_CACHE, True)
    with tempfile.TemporaryDirectory() as folder:
        config = apply_overrides(TrainConfig(), {**BASE, **settings, "iterations": iterations, "output_dir": folder})
        trainer = Trainer(config, progress=False)
        if not trunk_cache:
            from contextlib import nullcontext

            trainer.policy.caching_trunk = nullcontext  # type: ignore[method-assign, assignment]
        dtype = str(next(trainer.policy.model.parameters()).dtype).removeprefix("torch.")
        import torch

        threads = torch.get_num_threads()
        stages.timed(trainer.sampler, "generate", "sampling")
        stages.timed(trainer, "collect", "rollout rest")
        stages.timed(trainer.policy, "completion_logprobs", "scoring")
        stages.timed(trainer, "update", "update rest")
        rows = []
        for iteration in range(iterations):
            stages.seconds.clear()
            stages.peak = {}
            started = time.perf_counter()
            batch = trainer.collect(iteration)
            turns, advantages, _ = trainer.credit(batch)
            stats = trainer.update(turns, advantages, iteration)
            seconds = time.perf_counter() - started
            spent = dict(stages.seconds)
            spent["rollout rest"] -= spent.get("sampling", 0.0)
            spent["update rest"] -= spent.get("scoring", 0.0)
            rows.append({"iteration": iteration + 1, "seconds": seconds,
                         "stages": {stage: spent.get(stage, 0.0) for stage in STAGES},
                         "peak_gib": {stage: stages.peak.get(stage, 0.0) for stage in STAGES},
                         "meta_episodes": len(batch.episode_returns), "turns": len(turns),
                         "clip_fraction": stats.get("clip_fraction"), "approx_kl": stats.get("approx_kl")})
    return {"variant": name, "settings": VARIANTS[name], "dtype": dtype, "threads": threads, "iterations": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2, help="iterations per variant (default: %(default)s)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS)[:4], choices=list(VARIANTS))
    parser.add_argument("--output", default="benchmarks/results/smollm2-speed.json")
    parser.add_argument("--one", help=argparse.SUPPRESS)   # run one variant here, print its JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_variant(args.one, args.iterations)))
        return
    results = []
    for name in args.variants:
        done = subprocess.run([sys.executable, __file__, "--one", name, "--iterations", str(args.iterations)],
                              capture_output=True, text=True)
        if done.returncode:
            results.append({"variant": name, "settings": VARIANTS[name], "error": done.stderr[-2000:]})
            print(f"{name}: failed (exit {done.returncode})\n{done.stderr[-2000:]}")
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    from mage_agent.build import cpu_bfloat16_flag

    report = {"date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
              "cpu_bfloat16_flag": cpu_bfloat16_flag(), "cores": os.cpu_count(), "results": results}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    print(f"{'variant':10} {'dtype':9} thr {'it':>2} {'B x G':>6} {'seconds':>8} " +
          " ".join(f"{stage:>13}" for stage in STAGES) + "  peak GiB by stage")
    for result in results:
        for row in result.get("iterations", []):
            print(f"{result['variant']:10} {result['dtype']:9} {result['threads']:3} {row['iteration']:2} "
                  f"{row['meta_episodes']:6} {row['seconds']:8.1f} "
                  + " ".join(f"{row['stages'][stage]:13.1f}" for stage in STAGES) + "  "
                  + " ".join(f"{row['peak_gib'][stage]:.1f}" for stage in STAGES))
    ok = {r["variant"]: r for r in results if "iterations" in r}
    if "float32" in ok and "auto" in ok:
        base, new = (sum(row["seconds"] for row in ok[name]["iterations"]) for name in ("float32", "auto"))
        print(f"speed-up float32 / auto at 4 x 8 (all iterations): {base / new:.2f}x")
    if "auto-16" in ok and "top6-16" in ok:
        base, new = (sum(row["seconds"] for row in ok[name]["iterations"]) for name in ("auto-16", "top6-16"))
        print(f"speed-up auto-16 / top6-16 at 16 x 8 (all iterations): {base / new:.2f}x")


if __name__ == "__main__":
    main()
