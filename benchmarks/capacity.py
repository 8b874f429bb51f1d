"""Capacity check: can the embedded tiny model, given the default prompts and memory,
represent the play that the learning targets measure against?

The same model as `mage train` (same tokenizer, compact prompts, episode summaries as
memory, one action token) is trained by supervised learning, not RL, on an oracle's
actions, then evaluated like a trained run (300 meta-episodes per style, the (deal, seat)
cells stratified, sampling at temperature 1). If its final hand reaches the
oracle's, the model and prompt are not the limit and RL is; if not, they are.

* repeated deals (the default): in the early hands the oracle probes (``--probe``: check /
  call, so every hand reaches a showdown and the memory shows the opponent's card, or bet),
  in the final hand it plays :func:`~mage_envs.oracle.winnable.deal_known_action`;
* fresh deals (``--fresh-deals``): the oracle is
  :class:`~mage_envs.oracle.BayesAdaptiveAgent`, the Bayes-optimal agent whose final hand
  is worth :func:`~mage_envs.oracle.bayes_adaptive_value`; the share is of the best
  response on the final hands' own deals, as in the learning benchmark.

    python benchmarks/capacity.py --steps 400
    python benchmarks/capacity.py --fresh-deals --meta-episodes 600 --steps 1500

A single-agent task's config (``--config examples/household.yaml``: no opponents) checks
that task the same way: the oracle is the task's expert (``expert_actions()`` from the
current state, numbered as the prompt numbers the commands), played on the config's
training instances, and the evaluation is the config's (its evaluation instances), with
success by attempt index beside the expert's own on the same meta-episodes:

    python benchmarks/capacity.py --config examples/household.yaml --meta-episodes 60 --steps 400

``--choose-by text`` asks instead whether the numbering is the limit: the task's commands are
listed by name (``action_labels: none``) and the model picks one by the likelihood of its own
words (:class:`TextChooser`), fitted and evaluated that way:

    python benchmarks/capacity.py --config examples/household.yaml --meta-episodes 60 --steps 400 \
        --batch 16 --choose-by text

``--config`` checks another model and prompt the same way (a `mage train` config: its model,
adapter, prompt style and dtype), e.g. SmolLM2 with LoRA and the natural-language prompt (its
adapters on the last 6 layers run through a :class:`FrozenTrunk`, which needs float32):

    python benchmarks/capacity.py --config examples/smollm2_kuhn.yaml --set 'dtype="float32"' --steps 100 \
        --batch 16 --learning-rate 1e-3 --meta-episodes 40 --eval-meta-episodes 60
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from mage_envs.games.base import OpenSpielTextEnv

TRAINING = ["conservative", "aggressive", "intermediate"]
#: What the oracle plays in the early hands, by preference among the legal actions:
#: ``passive`` checks and calls (every hand reaches a showdown), ``bet`` bets and calls
#: (a fold to the bet tells the styles apart), ``bet-then-passive`` bets in hand 1 only.
PROBES = {"passive": [("call", "check")], "bet": [("bet", "call")], "bet-then-passive": [("bet", "call"), ("call", "check")]}
ROOT = Path(__file__).resolve().parent.parent


class ProbeThenDealKnown:
    """The repeated-deal oracle: ``probe``'s early hands, then the deal-known action."""

    def __init__(self, env: gym.Env, style: str, probe: str) -> None:
        self.env, self.style, self.probe = env, style, probe

    def __call__(self, observation: str, info: dict) -> str:
        from mage_envs.oracle.winnable import deal_known_action

        legal, hand = info["legal_actions"], info["episode_index"]
        if hand < info["num_episodes"] - 1:
            preference = PROBES[self.probe][min(hand, len(PROBES[self.probe]) - 1)]
            return next(a for a in preference if a in legal)
        game = self.env.unwrapped
        assert isinstance(game, OpenSpielTextEnv)
        state = game.state
        best = deal_known_action("kuhn_poker", self.style, state, info["instance"], info["seat"])
        return {i: name for name, i in game.action_names(state).items()}[best]


def expert_turns(config, meta_episodes: int, seed: int) -> list[tuple[str, tuple[str, ...], str, int, str]]:
    """(prompt, the answer's choices, the expert's choice, attempt index, task type) of every
    acting turn of ``meta_episodes`` meta-episodes of a single-agent task on the config's
    training instances (``reset(seed=seed + j)``), played by its expert: the first of
    ``expert_actions()`` from the current state. With numbered actions the choices are the
    labels and the expert's choice is its command's label (what the model answers)."""
    from mage_agent.build import env_kwargs

    env = gym.make(config.env.env_id, **env_kwargs(config))
    task: Any = env.unwrapped  # a single-agent task: expert_actions() from the current state
    rows = []
    for j in range(meta_episodes):
        obs, info = env.reset(seed=seed + j)
        done = False
        while not done:
            if info.get("phase", "act") != "act":
                obs, _, terminated, truncated, info = env.step("<reflection></reflection>")
            else:
                legal, labels = info["legal_actions"], info.get("action_labels")
                command = task.expert_actions()[0]
                choice = labels[legal.index(command)] if labels else command
                rows.append((obs, tuple(labels or legal), choice, info["episode_index"], str(info.get("task_type") or "")))
                obs, _, terminated, truncated, info = env.step(f"<action>{choice}</action>")
            done = terminated or truncated
    env.close()
    return rows


def task_report(policy, config, out: Path, chooser: TextChooser | None = None) -> dict[str, Any]:
    """A single-agent task's evaluation: success by attempt index of ``policy`` (or of
    ``chooser``) and of the expert on the same meta-episodes, on the config's evaluation
    instances (``eval``) and on its training instances (``train``: what the fit reaches on
    the games it was fitted on)."""
    from single_agent import ExpertAgent  # benchmarks/, the script's folder

    from mage_agent.build import eval_env_kwargs
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import apply_overrides
    from mage_envs.evaluation import evaluate

    splits = {"eval": config, "train": apply_overrides(config, {"eval_env_options": {
        **config.env.eval_env_options, "instance_split": config.env.env_options.get("instance_split", "all")}})}
    result: dict[str, Any] = {"eval_meta_episodes": config.run.eval_meta_episodes}
    for split, evaluated in splits.items():
        # the expert's (and a chooser's) meta-episodes are the policy's: same seeds, same instances
        same = {"meta_episodes": config.run.eval_meta_episodes, "seed": config.run.eval_seed,
                "env_kwargs": eval_env_kwargs(evaluated), "oracle": False, "progress": False}
        if chooser is None:
            report = evaluate_policy(policy, evaluated, out / f"eval_{split}.json", "supervised", progress=False,
                                     verbose=False, oracle=False)
        else:
            report = evaluate(chooser, config.env.env_id, agent_name="supervised-text", **same).to_dict()
        expert = evaluate(None, config.env.env_id, agent_name="expert", make_agent=ExpertAgent, **same)
        result[split] = {"env_options": dict(evaluated.env.eval_env_options),
                         "success_by_attempt": list(report["opponents"]["default"]["success_by_episode"]),
                         "expert_success_by_attempt": list(expert.opponents["default"].success_by_episode)}
    return result


def oracle_turns(config, meta_episodes: int, seed: int, probe: str) -> list[tuple[str, tuple[str, ...], str, int, str]]:
    """(prompt, legal actions, oracle action, hand index, style) of every acting turn of ``meta_episodes``
    meta-episodes per training style, the first hand's (deal, seat) stratified; the oracle
    is the Bayes-optimal agent with fresh deals (``config.env.repeat_instance`` false)."""
    from mage_agent.build import env_kwargs
    from mage_envs.oracle import BayesAdaptiveAgent
    from mage_envs.oracle.winnable import stratified_instances

    kwargs = env_kwargs(config)
    rows = []
    instances = stratified_instances("kuhn_poker", meta_episodes, seed)
    for style in TRAINING:
        env = gym.make(config.env.env_id, **{**kwargs, "opponent": style})
        oracle = (ProbeThenDealKnown(env, style, probe) if config.env.repeat_instance
                  else BayesAdaptiveAgent(env, population=TRAINING))
        for j, instance in enumerate(instances):
            obs, info = env.reset(seed=seed + j, options={"instance": instance})
            done = False
            while not done:
                answer = oracle(obs, info)
                action = answer.removeprefix("<action>").removesuffix("</action>")
                rows.append((obs, tuple(info["legal_actions"]), action, info["episode_index"], style))
                obs, _, terminated, truncated, info = env.step(answer)
                done = terminated or truncated
        env.close()
    return rows


class FrozenTrunk:
    """For an adapter on the last layers only (``lora_top_layers``): the hidden states below
    it, computed once per prompt (no adapter there, so they never change), and the action
    log-probabilities from the adapted layers on top. The same values as
    ``policy.completion_logprobs`` at a fraction of a step's cost."""

    def __init__(self, policy, prompts: list[list[int]], top_layers: int) -> None:
        from transformers import LlamaForCausalLM

        from mage_agent.policy import base_model

        self.lm = cast(LlamaForCausalLM, base_model(policy.model))   # Llama-family layers are run below
        if self.lm.dtype != torch.float32:   # transformers' layers would add the adapters' updates in low precision
            raise ValueError(f"the frozen trunk runs transformers' own layers: load the model in float32 "
                             f"(--set 'dtype=\"float32\"'), not {self.lm.dtype}")
        self.split = len(self.lm.model.layers) - top_layers
        with torch.no_grad():
            self.states = [self._layers(self.lm.model.layers[:self.split], self.lm.model.embed_tokens(
                torch.tensor([ids], device=self.lm.device))) for ids in tqdm(prompts, desc="frozen trunk", mininterval=10)]

    def _layers(self, layers, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden`` (batch, width, size) through ``layers``, causally, from position 0."""
        width = hidden.shape[1]
        positions = torch.arange(width, device=hidden.device)[None]
        rotary = self.lm.model.rotary_emb(hidden, positions)
        causal = torch.full((width, width), float("-inf"), dtype=hidden.dtype, device=hidden.device).triu(1)[None, None]
        for layer in layers:
            hidden = layer(hidden, attention_mask=causal, position_ids=positions, position_embeddings=rotary)
        return hidden

    def logprobs(self, prompts: list[list[int]], chosen: list[int], targets: list[int],
                 allowed: list[list[int]]) -> torch.Tensor:
        """log p(targets[i] | prompts[i]) among ``allowed[i]`` for each row i in ``chosen``,
        the rows right-padded into one batch (causal attention: padding after a row's last
        token never reaches it)."""
        from mage_agent.policy import head_logits

        width = max(len(prompts[i]) for i in chosen)
        hidden = torch.zeros((len(chosen), width, self.states[chosen[0]].shape[-1]), dtype=self.states[0].dtype,
                             device=self.states[0].device)
        for row, i in enumerate(chosen):
            hidden[row, :len(prompts[i])] = self.states[i][0]
        hidden = self._layers(self.lm.model.layers[self.split:], hidden)
        last = self.lm.model.norm(hidden[torch.arange(len(chosen)), [len(prompts[i]) - 1 for i in chosen]])
        out = []
        for row, i in enumerate(chosen):
            logits = head_logits(self.lm, last[row:row + 1], torch.tensor(allowed[i], device=last.device))[0]
            out.append(torch.log_softmax(logits.float(), dim=0)[allowed[i].index(targets[i])])
        return torch.stack(out)


def train_supervised(policy, rows, steps: int, batch: int, lr: float, seed: int, full_batch: bool = False,
                     top_layers: int = 0, cosine: bool = False,
                     chooser: TextChooser | None = None) -> tuple[list[float], dict[tuple, float]]:
    """Cross-entropy on the oracle's action token among the legal action tokens (with
    ``chooser``: on the oracle's command among the legal commands, by their words): on
    ``batch`` turns drawn at random per step, or (``full_batch``) on every distinct turn,
    weighted by how often it occurs (the same expected loss, for a model slow per row), in
    micro-batches sized to the trainer's activation budget; with an adapter on the
    ``top_layers`` last layers only, through a :class:`FrozenTrunk`; ``cosine``: the
    learning rate decays from ``lr`` to zero over the steps. Also returns the
    log-probability of the oracle action per distinct turn after the last step."""
    from mage_agent.memory import default_token_budget, micro_batches

    rng = random.Random(seed)
    turns = [row[:3] for row in rows]   # (prompt, legal, action): a prompt met against two styles is one row
    distinct = Counter(turns)
    unique = list(distinct)
    place = {turn: i for i, turn in enumerate(unique)}
    prompts = policy.encode_prompts([r[0] for r in unique])
    one_token = chooser is None
    allowed = [policy.single_token_ids(r[1]) for r in unique] if one_token else []
    targets = [policy.single_token_ids([r[2]]) for r in unique] if one_token else []
    target_ids = [t[0] for t in targets]
    weights = torch.tensor([distinct[r] for r in unique], dtype=torch.float32)
    weights = (weights / weights.sum()).to(policy.device)
    budget = default_token_budget(policy.model.config, next(policy.model.parameters()).element_size())
    parts = micro_batches(prompts, budget)
    trunk = FrozenTrunk(policy, prompts, top_layers) if top_layers else None

    def score(chosen: list[int], through_trunk: bool = True) -> torch.Tensor:
        if chooser is not None:
            choices = chooser.logprobs([prompts[i] for i in chosen], [unique[i][1] for i in chosen])
            return torch.stack([lp[unique[i][1].index(unique[i][2])] for lp, i in zip(choices, chosen)])
        if trunk is not None and through_trunk:
            return trunk.logprobs(prompts, chosen, target_ids, allowed)
        logprobs, _, _ = policy.completion_logprobs([prompts[i] for i in chosen], [targets[i] for i in chosen],
                                                    allowed_ids=[allowed[i] for i in chosen])
        return logprobs[:, 0]

    if trunk is not None:   # the same values as the scorer's own, checked on a few rows
        probe = list(range(min(4, len(unique))))
        with torch.no_grad():
            mine, theirs = score(probe), score(probe, through_trunk=False)
        print(f"frozen trunk: {len(prompts)} prompts below layer {trunk.split}; "
              f"max |log-prob - scorer's| {float((mine - theirs).abs().max()):.2e}")
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps) if cosine else None
    losses = []
    for _ in tqdm(range(steps), desc="supervised", mininterval=10):
        optimizer.zero_grad()
        if full_batch:
            loss_value = 0.0
            for part in parts:
                loss = -(score(part) * weights[part]).sum()
                loss.backward()
                loss_value += loss.item()
        else:
            loss = -score([place[turns[rng.randrange(len(turns))]] for _ in range(batch)]).mean()
            loss.backward()
            loss_value = loss.item()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        losses.append(loss_value)
    with torch.no_grad():   # every distinct turn, scored after the last step
        final = torch.cat([score(part) for part in parts]).tolist()
    order = [i for part in parts for i in part]
    return losses, {unique[i]: lp for i, lp in zip(order, final)}


class TextChooser:
    """Picks one of a turn's legal commands by the likelihood of the command's own words: its
    tokens, then the end of sequence, scored after the prompt, and a softmax over the
    commands (how GLAM lets a language model choose among an environment's actions). For a
    model that cannot name a command in one token; ``act_batch`` samples at temperature 1.

    Example:
        >>> from mage_agent.policy import Policy
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> tok = build_tokenizer(["open take fridge apple 1"])
        >>> chooser = TextChooser(Policy(build_model(tok), tok))
        >>> logprobs = chooser.logprobs([chooser.policy.encode_prompt("take")], [("open fridge 1", "take apple 1")])
        >>> logprobs[0].shape, round(float(logprobs[0].exp().sum()), 4)
        (torch.Size([2]), 1.0)
    """

    def __init__(self, policy, seed: int = 0) -> None:
        self.policy = policy
        self.generator = torch.Generator().manual_seed(seed)

    def logprobs(self, prompts: list[list[int]], commands: list[tuple[str, ...]]) -> list[torch.Tensor]:
        """Per prompt, the log-probabilities of choosing each of its commands."""
        end = self.policy.tokenizer.eos_token_id
        rows = [(prompt, list(tokens) + [end]) for prompt, names in zip(prompts, commands)
                for tokens in self.policy.encode_words(list(names))]
        scored, _, _ = self.policy.completion_logprobs([r[0] for r in rows], [r[1] for r in rows])
        totals = scored.sum(-1).split([len(names) for names in commands])
        return [torch.log_softmax(total, 0) for total in totals]

    def act_batch(self, observations: list[str], infos: list[dict]) -> list[str]:
        acting = [i for i, info in enumerate(infos) if info.get("phase", "act") == "act"]
        answers = ["<reflection></reflection>"] * len(infos)
        with torch.no_grad():
            chosen = self.logprobs(self.policy.encode_prompts([observations[i] for i in acting]),
                                   [tuple(infos[i]["legal_actions"]) for i in acting])
        for i, logprobs in zip(acting, chosen):
            pick = int(torch.multinomial(logprobs.exp(), 1, generator=self.generator))
            answers[i] = f"<action>{infos[i]['legal_actions'][pick]}</action>"
        return answers

    def __call__(self, observation: str, info: dict) -> str:
        return self.act_batch([observation], [info])[0]


def fit_by_hand(rows, last: dict[tuple, float], unit: str = "hand", joiner: str = "vs") -> dict[str, dict[str, float]]:
    """Where the remaining loss sits: per hand and per (final hand, style), the mean
    negative log-probability of the oracle's action over the turns (counted with
    repeats) and the share of turns whose oracle action has probability above one half
    (a task's rows: per ``unit="attempt"`` and per (final attempt, task type))."""
    groups: dict[str, list[float]] = {}
    final = max(r[3] for r in rows)
    for row in rows:
        keys = [f"{unit} {row[3] + 1}"] + ([" ".join(filter(None, (unit, str(row[3] + 1), joiner, row[4])))]
                                          if row[3] == final else [])
        for key in keys:
            groups.setdefault(key, []).append(last[row[:3]])
    return {key: {"turns": len(lps), "nll": -float(np.mean(lps)), "above_half": float(np.mean(np.exp(lps) > 0.5))}
            for key, lps in sorted(groups.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--cosine", action="store_true", help="decay the learning rate to zero over the steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", choices=list(PROBES), default="bet-then-passive",
                        help="repeated deals: the early hands' play")
    parser.add_argument("--fresh-deals", action="store_true",
                        help="a new deal every hand, the Bayes-optimal agent as the oracle")
    parser.add_argument("--meta-episodes", type=int, default=120,
                        help="oracle meta-episodes per style (a single-agent task: in all)")
    parser.add_argument("--full-batch", action="store_true",
                        help="every distinct oracle turn in each step, weighted by its count (for a large model)")
    parser.add_argument("--config", default=None,
                        help="a mage train config whose model and prompt are checked (default: the embedded model)")
    parser.add_argument("--eval-meta-episodes", type=int, default=None,
                        help="meta-episodes per style in the evaluation (default: the config's)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: the config's)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=JSON",
                        help='a further config setting, e.g. --set \'lora_target_modules=["q_proj","down_proj"]\'')
    parser.add_argument("--only-hands", type=int, nargs="+", default=None, metavar="N",
                        help="fit the turns of these hands (attempts), counted from 1, only: whether their "
                             "decisions fit on their own, apart from the other hands' labels")
    parser.add_argument("--choose-by", choices=["token", "text"], default="token",
                        help="a task's commands: one token each (numbers, as the config says), or listed by name "
                             "and chosen by the likelihood of their words (TextChooser)")
    parser.add_argument("--save-adapter", default=None, metavar="DIR", help="save the trained adapter (or model) here")
    parser.add_argument("--fit-only", action="store_true",
                        help="stop after the fit (losses and fit by hand): no evaluation of the fitted model")
    parser.add_argument("--output", default=None,
                        help="default: benchmarks/results/capacity-<probe>.json (capacity-fresh-deals.json)")
    args = parser.parse_args()

    from mage_agent.build import build_policy, population_of, threads_for
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides, load_config

    torch.manual_seed(args.seed)
    out = Path(tempfile.mkdtemp())
    overrides: dict[str, Any] = {"seed": args.seed, "output_dir": str(out), "heldout": [],
                                 "repeat_instance": not args.fresh_deals}
    if args.eval_meta_episodes is not None:
        overrides["eval_meta_episodes"] = args.eval_meta_episodes
    if args.threads is not None:
        overrides["threads"] = args.threads
    base = load_config(args.config) if args.config else TrainConfig()
    if not base.env.population:   # the oracle's styles (a game's default population may hold more)
        overrides["population"] = dict.fromkeys(TRAINING, 1.0)
    for setting in args.set:
        name, _, value = setting.partition("=")
        overrides[name] = json.loads(value)
    if args.choose_by == "text":
        overrides["env_options"] = {**base.env.env_options, **overrides.get("env_options", {}), "action_labels": "none"}
    config = apply_overrides(base, overrides)
    single_agent = not population_of(config)   # a task: its expert is the oracle
    if args.choose_by == "text" and not single_agent:
        parser.error("--choose-by text is for a single-agent task's config (--config examples/household.yaml)")
    policy = build_policy(config, out)
    torch.set_num_threads(threads_for(config.run.threads, policy.model))
    rows = (expert_turns(config, args.meta_episodes, args.seed) if single_agent
            else oracle_turns(config, args.meta_episodes, seed=args.seed, probe=args.probe))
    if args.only_hands:
        rows = [row for row in rows if row[3] + 1 in args.only_hands]
    labels: dict[str, set[str]] = {}
    for prompt, _, action, _, _ in rows:
        labels.setdefault(prompt, set()).add(action)
    ambiguous = sum(len(actions) > 1 for actions in labels.values())
    started = time.perf_counter()
    chooser = TextChooser(policy, args.seed) if args.choose_by == "text" else None
    losses, last = train_supervised(policy, rows, args.steps, args.batch, args.learning_rate, args.seed,
                                    args.full_batch, config.model.lora_top_layers if config.model.lora else 0,
                                    args.cosine, chooser)
    training_seconds = time.perf_counter() - started
    if args.save_adapter:
        policy.model.save_pretrained(args.save_adapter)
    result: dict[str, Any] = {"args": vars(args), "turns": len(rows), "prompts": len(labels), "ambiguous_prompts": ambiguous,
              "final_loss": float(np.mean(losses[-20:])), "losses": [round(x, 5) for x in losses],
              "training_seconds": training_seconds, "styles": {}}
    if last:
        result["fit_by_hand"] = fit_by_hand(rows, last, *(("attempt", "") if single_agent else ()))
        for key, fit in result["fit_by_hand"].items():
            print(f"{key:<28} {fit['turns']:>4} turns  nll {fit['nll']:.3f}  p>0.5 on {fit['above_half']:.0%}")
    if args.fit_only:
        del result["styles"]
        print(f"{len(rows)} oracle turns, {len(labels)} prompts, final loss {result['final_loss']:.4f} (not evaluated)")
        name = "fresh-deals" if args.fresh_deals else args.probe
        path = ROOT / (args.output or f"benchmarks/results/capacity-{Path(args.config or 'tiny').stem}-{name}-fit.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        return
    if single_agent:
        del result["styles"]
        result.update(env_options=dict(config.env.env_options), **task_report(policy, config, out, chooser))
        print(f"{len(rows)} expert turns, {len(labels)} prompts, final loss {result['final_loss']:.4f}; success by "
              f"attempt on evaluation games {result['eval']['success_by_attempt']}, on training games "
              f"{result['train']['success_by_attempt']} (expert {result['eval']['expert_success_by_attempt']})")
        by_text = "-text" if chooser is not None else ""
        path = ROOT / (args.output or f"benchmarks/results/capacity-{Path(args.config).stem}{by_text}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        return
    report = evaluate_policy(policy, config, out / "eval.json", "supervised", progress=False, verbose=False)
    for style in TRAINING:
        r = report["opponents"][style]
        returns = r["mean_return_by_episode"]
        ceiling = r["instance_optimal_value"] if not args.fresh_deals else r["best_response_by_episode"][-1]
        result["styles"][style] = {"first": returns[0], "final": returns[-1], "ceiling": ceiling,
                                   "share": returns[-1] / ceiling}
        print(f"{style:<13} hand 1 {returns[0]:+.3f}  final {returns[-1]:+.3f}  ceiling {ceiling:+.3f}  "
              f"share {returns[-1] / ceiling:.2f}")
    styles = result["styles"].values()
    result["share_of_mean_ceiling"] = sum(s["final"] for s in styles) / sum(s["ceiling"] for s in styles)
    summary = f"final hand {result['share_of_mean_ceiling']:.0%} of the styles' mean ceiling"
    if args.fresh_deals:   # the teacher itself on the very meta-episodes evaluated
        result["bayes_adaptive_value"] = report["bayes_adaptive_value"]
        result["bayes_final"] = {style: report["bayes_by_episode"][style][-1] for style in TRAINING}
        result["share_of_bayes"] = (sum(s["final"] for s in styles) / sum(result["bayes_final"].values()))
        summary += f", {result['share_of_bayes']:.0%} of the Bayes-optimal agent's on the same meta-episodes"
    print(f"{len(rows)} oracle turns, {len(labels)} prompts ({ambiguous} with two oracle actions), final loss "
          f"{result['final_loss']:.4f}; {summary}")
    name = "fresh-deals" if args.fresh_deals else args.probe
    if args.config:
        name = f"{Path(args.config).stem}-{name}"
    path = ROOT / (args.output or f"benchmarks/results/capacity-{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
