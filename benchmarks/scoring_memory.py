"""Peak memory and time of scoring completions: ``Policy.completion_logprobs`` next to the
plain way (all logits of every position, then the completion positions picked out).

A Qwen2-shaped model with a real vocabulary (151,936 tokens, as Qwen2.5/Qwen3) but a small
body, so the LM head's logits dominate as they do on a real model with long prompts. Each
variant runs forward and backward on the same batch in its own process, and the peak
resident memory above the process's level before scoring is reported (``ru_maxrss``), with
the ratio of the two measured in one run. Both variants must give the same log-probs.

Run: ``python benchmarks/scoring_memory.py [--rows 4] [--prompt 512] [--completion 16] [--duplicates 1]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

VARIANTS = ("plain", "policy")


def measure(variant: str, rows: int, prompt: int, completion: int, vocab: int, duplicates: int) -> dict:
    """Score one batch with ``variant`` in this process: peak extra memory (MiB), seconds, log-prob sum."""
    import torch
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from mage_agent.policy import Policy

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 0}, unk_token="<pad>")),
                                        pad_token="<pad>", eos_token="<pad>")
    policy = Policy(model, tokenizer, keep_reference=False)
    g = torch.Generator().manual_seed(1)
    distinct = max(rows // duplicates, 1)
    prompts = [torch.randint(1, vocab, (prompt,), generator=g).tolist() for _ in range(distinct)]
    prompts = [prompts[k % distinct] for k in range(rows)]
    completions = [torch.randint(1, vocab, (completion,), generator=g).tolist() for _ in range(rows)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if variant == "plain":
        model.eval()
        ids = torch.tensor([p + c for p, c in zip(prompts, completions)])
        logits = model(input_ids=ids, use_cache=False).logits
        picked = logits[:, prompt - 1: prompt + completion - 1]
        logprobs = torch.log_softmax(picked.float(), -1).gather(-1, torch.tensor(completions)[:, :, None])[..., 0]
    else:
        logprobs, _, _ = policy.completion_logprobs(prompts, completions)
    logprobs.sum().backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"variant": variant, "peak_mib": (peak - before) / 1024, "seconds": seconds,
            "logprob_sum": float(logprobs.sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4, help="completions scored in one batch")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens per row")
    parser.add_argument("--completion", type=int, default=16, help="completion tokens per row")
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--duplicates", type=int, default=1, help="rows sharing each prompt (a group's copies)")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one measurement, in a child
    args = parser.parse_args()
    shape = (args.rows, args.prompt, args.completion, args.vocab, args.duplicates)
    if args.variant:
        print(json.dumps(measure(args.variant, *shape)))
        return
    results = {}
    for variant in VARIANTS:  # each in a fresh process: ru_maxrss only ever grows
        done = subprocess.run([sys.executable, __file__, "--variant", variant, "--rows", str(args.rows),
                               "--prompt", str(args.prompt), "--completion", str(args.completion),
                               "--vocab", str(args.vocab), "--duplicates", str(args.duplicates)],
                              capture_output=True, text=True, check=True)
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    plain, policy = results["plain"], results["policy"]
    print(f"{args.rows} rows x ({args.prompt} prompt + {args.completion} completion) tokens, "
          f"vocabulary {args.vocab:,}, {args.duplicates} row(s) per prompt")
    for name, result in results.items():
        print(f"  {name:>6}: peak +{result['peak_mib']:8.1f} MiB, {result['seconds']:6.2f} s, "
              f"log-prob sum {result['logprob_sum']:.4f}")
    print(f"  memory ratio plain/policy: {plain['peak_mib'] / max(policy['peak_mib'], 1e-9):.1f}x, "
          f"time ratio: {plain['seconds'] / policy['seconds']:.1f}x")
    if abs(plain["logprob_sum"] - policy["logprob_sum"]) > 1e-3 * max(1.0, abs(plain["logprob_sum"])):
        raise SystemExit("the two variants disagree on the log-probs")


if __name__ == "__main__":
    main()
