"""Free-text sampling with SmolLM2-135M + LoRA, side by side: transformers' padded forward
(the path before) against the packed prefill and decoder, in float32 and in bfloat16.

The prompts are Kuhn Poker acting prompts from random play (``free_text.acting_prompts``,
the ``full`` prompt with the closing question), answered after the ``<action>`` prefix,
stopping at ``</action>``, up to ``--max-new-tokens`` tokens, at temperature 1. Two batches:
``groups`` (16 prompts x 8 copies, as a training iteration's first turn: the copies share
their prompt) and ``distinct`` (128 different prompts, as an evaluation's); ``--prompts``
scales both (``groups``: that many prompts x 8). Each path is
timed on the same batch with the same seed, after a small warm-up, in one process: compare
the ratios, not the seconds; the packed paths decode in row batches of similar length
(``DECODE_POSITIONS``). Exactness: the packed float32 path, run once more decoding each batch
whole (so that it draws in the padded path's row order), must draw the very tokens of the
padded one (else the script exits with status 1); the bfloat16 path's log-probs of the padded path's completions are
compared with float32's (max and mean absolute difference).

    python benchmarks/free_text_speed.py --output benchmarks/results/free-text-speed.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from free_text import QUESTION, acting_prompts  # noqa: E402

#: The sampling paths compared: (packed forward, weight dtype).
PATHS = {"padded float32 (before)": (False, torch.float32), "packed float32": (True, torch.float32),
         "packed bfloat16": (True, torch.bfloat16)}


def load(packed: bool, dtype: torch.dtype):
    """SmolLM2 with the SmolLM2 config's LoRA (rank 16, alpha 128, last 6 layers), the same
    adapter whatever the path (seeded; its B drawn at random so that it changes the answers)."""
    from mage_agent.policy import LoraSettings, Policy
    from mage_agent.pretrained import resolve_model_path

    lora = LoraSettings(rank=16, alpha=128, dropout=0.0, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"),
                        top_layers=6)
    torch.manual_seed(0)   # the adapter's A
    policy = Policy.from_pretrained(resolve_model_path("smollm2-135m"), lora=lora, device="cpu", dtype=dtype,
                                    packed_forward=packed)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_A" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 1e-3)
    return policy


#: Copies of each prompt in the ``groups`` batch (a training group's size).
COPIES = 8


def batches(seed: int, prompts: int = 16) -> dict[str, list[str]]:
    """The two batches of prompts (with the closing question): ``prompts`` x :data:`COPIES`
    copies, and as many distinct prompts."""
    texts = [p + QUESTION.format(options=" or ".join(legal)) for p, legal in acting_prompts("full", prompts * COPIES, seed)]
    return {"groups": [p for p in texts[:prompts] for _ in range(COPIES)], "distinct": texts}


def main() -> None:
    from mage_agent import packing
    from mage_agent.sampling import Sampling, TorchSampler

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=16, help=f"prompts of the groups batch (x {COPIES} copies)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sampling = Sampling(temperature=1.0, max_new_tokens=args.max_new_tokens, stop=("</action>",))
    prompts = batches(args.seed, args.prompts)
    policies = {name: load(*spec) for name, spec in PATHS.items()}
    result: dict = {"machine": platform.processor() or platform.machine(), "threads": args.threads,
                    "max_new_tokens": args.max_new_tokens, "torch": torch.__version__, "batches": {}}
    for batch, texts in prompts.items():
        rows: dict = {}
        generations = {}
        for name, policy in policies.items():
            sampler = TorchSampler(policy)
            sampler.generate(texts[:4], sampling, seed=1, prefixes=["<action>"] * 4)   # warm-up
            start = time.perf_counter()
            generations[name] = sampler.generate(texts, sampling, seed=args.seed, prefixes=["<action>"] * len(texts))
            rows[name] = {"seconds": round(time.perf_counter() - start, 2)}
            print(f"{batch:>8} {name:<24} {rows[name]['seconds']:7.2f} s", flush=True)
        before = generations["padded float32 (before)"]
        whole = packing.DECODE_POSITIONS
        packing.DECODE_POSITIONS = 1 << 17   # one decoding batch: the draws in the padded path's order
        exact = TorchSampler(policies["packed float32"]).generate(texts, sampling, seed=args.seed,
                                                                   prefixes=["<action>"] * len(texts))
        packing.DECODE_POSITIONS = whole
        same = [a.completion_ids == b.completion_ids for a, b in zip(exact, before)]
        exact_gap = max((abs(x - y) for a, b in zip(exact, before)
                         if a.completion_ids == b.completion_ids for x, y in zip(a.logprobs, b.logprobs)), default=0.0)
        low = policies["packed bfloat16"]
        with torch.no_grad():
            scored, _, mask = low.completion_logprobs([g.prompt_ids for g in before], [g.completion_ids for g in before])
        sampled = torch.zeros_like(scored)
        for row, generation in enumerate(before):
            sampled[row, :len(generation.logprobs)] = torch.tensor(generation.logprobs)
        gap = (scored - sampled).abs()[mask.bool()]
        for name in rows:
            rows[name]["speedup_over_before"] = round(rows["padded float32 (before)"]["seconds"] / rows[name]["seconds"], 2)
        result["batches"][batch] = {
            "rows": len(texts), "distinct_prompts": len(set(texts)), "paths": rows,
            "packed_float32_same_tokens": sum(same) / len(same),
            "packed_float32_logprob_gap_max": round(exact_gap, 6),
            "bfloat16_logprob_gap": {"max": round(float(gap.max()), 5), "mean": round(float(gap.mean()), 5)},
            "tokens_per_answer": round(sum(len(g.completion_ids) for g in before) / len(before), 2),
        }
        print(json.dumps(result["batches"][batch]), flush=True)
    if args.output:
        args.output.write_text(json.dumps(result, indent=1))
    if any(row["packed_float32_same_tokens"] < 1 for row in result["batches"].values()):
        sys.exit("the packed float32 path drew other tokens than the padded one")


if __name__ == "__main__":
    main()
