"""The Sampler seam: another backend plugged into the rollout, the agents and the trainer
draws every answer, and what it returns is what the loss scores."""

from contextlib import contextmanager
from typing import Iterator, Sequence

import pytest
import torch

from mage_agent.agents import PolicyAgent
from mage_agent.cli import evaluate_policy
from mage_agent.config import apply_overrides
from mage_agent.policy import Policy
from mage_agent.rollout import GroupSpec, RolloutRunner
from mage_agent.sampling import Generation, Sampler, Sampling, TorchSampler
from mage_agent.tiny import TinyConfig, build_model, build_tokenizer
from mage_agent.trainer import Trainer

from .test_trainer import run_config


class GreedySampler:
    """A second backend: each prompt's most likely allowed token, one forward pass per
    prompt, without a KV cache (single-token answers only)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.blocks = 0   # reusing_prefixes blocks entered
        self.calls = 0    # generate calls

    @contextmanager
    def reusing_prefixes(self) -> Iterator[None]:
        self.blocks += 1
        yield

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], sampling: Sampling, allowed_ids: Sequence[list[int] | None] | None = None,
                 seed: int | None = None, prefixes: Sequence[str] | None = None) -> list[Generation]:
        assert sampling.max_new_tokens == 1, "GreedySampler answers with one token"
        self.calls += 1
        out = []
        for row, prompt in enumerate(prompts):
            prefix = prefixes[row] if prefixes is not None else ""
            ids = self.policy.encode_prompts([prompt])[0] + self.policy.encode_prefix(prefix)
            scores = self.policy.model(input_ids=torch.tensor([ids])).logits[0, -1].float() / sampling.temperature
            allowed = None if allowed_ids is None else allowed_ids[row]
            if allowed is not None:
                scores = torch.full_like(scores, float("-inf")).index_copy(0, torch.tensor(allowed), scores[allowed])
            logprobs = torch.log_softmax(scores, -1)
            token = int(logprobs.argmax())
            out.append(Generation(ids, [token], [float(logprobs[token])], prefix + self.policy.decode([token]),
                                  False, allowed))
        return out


@pytest.fixture(scope="module")
def policy():
    tok = build_tokenizer(["check bet fold call"])
    return Policy(build_model(tok, TinyConfig(seed=3)), tok, packed_forward=True)


def best_allowed(policy: Policy, prompt_ids: list[int], allowed: list[int]) -> tuple[int, float]:
    """The allowed token the policy scores highest after ``prompt_ids``, and its log-prob."""
    with torch.no_grad():
        scored = policy.completion_logprobs([prompt_ids] * len(allowed), [[t] for t in allowed],
                                            allowed_ids=[allowed] * len(allowed))[0][:, 0]
    best = int(scored.argmax())
    return allowed[best], float(scored[best])


def test_a_rollout_plays_what_the_plugged_in_sampler_draws(policy):
    runner = RolloutRunner("mage/KuhnPoker-meta-v0", {"reflection": False}, num_envs=4)
    groups = [GroupSpec(0, "nash"), GroupSpec(1, "aggressive")]
    greedy: Sampler = GreedySampler(policy)
    batches = [runner.collect(policy, groups, group_size=2, sampling=Sampling(max_new_tokens=1), action_tokens=True,
                              seed=seed, sampler=greedy) for seed in (0, 1)]
    assert greedy.blocks == 2 and greedy.calls >= 6   # one block per collection, one call per lockstep turn (3 hands)
    batch = batches[0]
    assert len(batch.turns) >= 12 and all(t.allowed_ids for t in batch.turns)
    for turn in batch.turns:   # the argmax of the policy's own scores, with the log-prob the loss computes
        token, logprob = best_allowed(policy, turn.prompt_ids, turn.allowed_ids)
        assert turn.completion_ids == [token]
        assert turn.logprobs[0] == pytest.approx(logprob, abs=1e-5)
    # greedy ignores the seed: the second collection plays the same answers
    assert [t.completion_ids for t in batches[1].turns] == [t.completion_ids for t in batch.turns]
    # the default sampler draws from the distribution instead: over these turns it leaves the argmax
    default = runner.collect(policy, groups, group_size=2, sampling=Sampling(max_new_tokens=1), action_tokens=True,
                             seed=0)
    assert any(t.completion_ids != [best_allowed(policy, t.prompt_ids, t.allowed_ids)[0]] for t in default.turns)
    runner.close()


def test_an_agent_and_the_trainer_take_the_plugged_in_sampler(policy, tmp_path):
    greedy = GreedySampler(policy)
    agent = PolicyAgent(policy, Sampling(max_new_tokens=1), action_tokens=True, sampler=greedy)
    info = {"legal_actions": ["check", "bet"], "phase": "act"}
    allowed = policy.single_token_ids(["check", "bet"])
    assert allowed is not None
    answer = agent.act_batch(["check or bet?"], [info])[0]
    assert answer == policy.decode([best_allowed(policy, policy.encode_prompt("check or bet?"), allowed)[0]])
    assert greedy.calls == 1 and isinstance(PolicyAgent(policy, Sampling()).sampler, TorchSampler)

    trainer = Trainer(run_config(tmp_path, "greedy", iterations=1), progress=False)
    trainer.sampler = GreedySampler(trainer.policy)
    batch = trainer.collect(0)
    assert trainer.sampler.blocks == 1
    for turn in batch.turns:
        assert turn.allowed_ids is not None
        assert turn.completion_ids == [best_allowed(trainer.policy, turn.prompt_ids, turn.allowed_ids)[0]]

    # mage train's evaluations play through the trainer's sampler too
    calls = trainer.sampler.calls
    evaluate_policy(trainer.policy, apply_overrides(trainer.config, {"eval_meta_episodes": 2}), tmp_path / "eval.json",
                    "trained", progress=False, verbose=False, opponents=["aggressive"], oracle=False,
                    sampler=trainer.sampler)
    assert trainer.sampler.calls > calls and trainer.sampler.blocks == 2
