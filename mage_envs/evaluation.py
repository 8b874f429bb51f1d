"""The evaluation harness: any agent, per opponent and per episode index, beside the oracles.

An *agent* is any callable ``(observation: str, info: dict) -> str``; it answers both the
acting prompts and (in meta envs) the reflection prompts (``info["phase"]``). An agent that
needs the env itself (an oracle reading the engine state) is given as a factory
``make_agent(env) -> agent`` instead, e.g. ``make_agent=BestResponseAgent``.

With ``transcript=PATH`` every finished meta-episode is appended to a JSONL file
(:mod:`mage_envs.transcripts`) and a rerun with the same file plays only the meta-episodes
not in it: an interrupted evaluation of a paid API model resumes without repeating a call.

Example:
    >>> from mage_envs.oracle.agents import RandomLegalAgent
    >>> report = evaluate(RandomLegalAgent(seed=0), "mage/KuhnPoker-meta-v0",
    ...                   opponents=["aggressive"], meta_episodes=20, seed=0,
    ...                   oracle=False, progress=False)
    >>> len(report.opponents["aggressive"].mean_return_by_episode)
    3
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

from .opponents.registry import RESERVED_POPULATION_NAMES, list_opponents
from .transcripts import Transcript

#: With fresh deals, episode index ``k`` is stratified from seed ``seed + FRESH_STRIDE * k``.
FRESH_STRIDE = 7919

Agent = Callable[[str, dict[str, Any]], str]
AgentFactory = Callable[[gym.Env], Agent]


class BatchAgent(Protocol):
    """An agent that answers many prompts in one call (e.g. one batched ``generate``).

    An agent may also keep ``last_usage``, a list with the token usage of each answer of
    its last call (``None`` where unknown), which transcripts record, and ``settings``, a
    dict of what shapes its answers (model, temperature...), which a transcript must match
    to be resumed.
    """

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]: ...


@dataclass
class OpponentResult:
    """Per-episode-index statistics against one opponent archetype."""

    meta_episodes: int
    mean_return_by_episode: list[float]
    stderr_return_by_episode: list[float]
    success_by_episode: list[float]
    win_rate_by_episode: list[float]
    draw_rate_by_episode: list[float]
    loss_rate_by_episode: list[float]
    invalid_action_rate: float
    best_response_value: float | None = None
    best_response_stderr: float | None = None
    best_response_exact: bool | None = None
    equilibrium_value: float | None = None
    #: repeat-instance meta-episodes only: the best return knowing the deal (the final
    #: episode's ceiling once earlier episodes revealed it), averaged over the very
    #: instances evaluated; exact opponents only
    instance_optimal_value: float | None = None
    #: fresh-deal meta-episodes only: per episode index, the best response's expected return
    #: on the very (deal, seat) instances that episode index was played on (its ceiling
    #: without the deal noise of ``best_response_value``); exact opponents in games with deals
    best_response_by_episode: list[float] | None = None


@dataclass
class EvaluationReport:
    """All results of one :func:`evaluate` call; ``to_json``/``save``/``table``."""

    env_id: str
    agent: str
    seed: int
    num_episodes: int
    env_kwargs: dict[str, Any]
    opponents: dict[str, OpponentResult] = field(default_factory=dict)
    #: whether the meta-episodes covered every (deal, seat) cell in turn (:func:`evaluate`)
    stratified: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> Path:
        """Write the report as JSON (parent folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, default=_json_default))
        return path

    def table(self) -> str:
        """A plain-text table: mean return ± SE per episode index, success, oracle values."""
        n = self.num_episodes
        head = ["opponent"] + [f"ep{i + 1} return" for i in range(n)] + [f"ep{n} win", "invalid", "best resp.", "equilibrium"]
        ceilings = any(r.instance_optimal_value is not None for r in self.opponents.values())
        if ceilings:   # repeated deals: the final episode beside the best return knowing the deal
            head += ["deal-known", "share"]
        rows = [head]
        for name, r in self.opponents.items():
            returns = [f"{m:+.3f}±{s:.3f}" for m, s in zip(r.mean_return_by_episode, r.stderr_return_by_episode)]
            oracle = "-" if r.best_response_value is None else (
                f"{r.best_response_value:+.3f}" + ("" if r.best_response_exact else f"±{r.best_response_stderr:.3f}~")
            )
            equilibrium = "-" if r.equilibrium_value is None else f"{r.equilibrium_value:+.3f}"
            row = [name, *returns, f"{r.win_rate_by_episode[-1]:.2f}", f"{r.invalid_action_rate:.3f}", oracle, equilibrium]
            if ceilings:
                ceiling = r.instance_optimal_value
                row += ["-", "-"] if ceiling is None else [f"{ceiling:+.3f}", _share(r.mean_return_by_episode[-1], ceiling)]
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        title = f"{self.agent} on {self.env_id} (seed {self.seed}; ~ marks a Monte Carlo estimate)"
        on_sample = [f"  {name}: " + " ".join(f"{v:+.3f}" for v in r.best_response_by_episode)
                     for name, r in self.opponents.items() if r.best_response_by_episode]
        if on_sample:   # fresh deals: the best response on each episode index's own deals
            lines += ["best response on the deals each episode index was dealt:", *on_sample]
        return "\n".join([title, *lines])


def _share(value: float, ceiling: float) -> str:
    """``value`` as a share of a positive ``ceiling`` (``-`` for a ceiling of zero or less).

    Example:
        >>> _share(0.25, 0.5), _share(0.1, 0.0)
        ('0.50', '-')
    """
    return f"{value / ceiling:.2f}" if ceiling > 0 else "-"


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def resolve_opponents(game: str, opponents: str | Sequence[str] | None) -> list[str]:
    """Archetype ids from ``None`` (every archetype), a split name, or a list of ids."""
    if opponents is None:
        return list_opponents(game)
    if isinstance(opponents, str):
        if opponents in RESERVED_POPULATION_NAMES:
            return list_opponents(game, None if opponents == "all" else opponents)
        return [opponents]
    return list(opponents)


def evaluate(
    agent: Agent | None,
    env_id: str,
    opponents: str | Sequence[str] | None = None,
    meta_episodes: int = 100,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    oracle: bool = True,
    progress: bool = True,
    agent_name: str | None = None,
    make_agent: AgentFactory | None = None,
    batch_size: int = 256,
    stratify: bool = True,
    transcript: str | Path | None = None,
    transcript_steps: int | None = None,
) -> EvaluationReport:
    """Play ``meta_episodes`` (meta-)episodes of ``env_id`` against each opponent.

    Meta-episode ``j`` uses seed ``seed + j`` for every opponent, so every opponent meets
    the same deals. With ``stratify`` (games only) meta-episode ``j`` plays the ``j``-th of
    :func:`~mage_envs.oracle.winnable.stratified_instances`, so every (deal, seat) cell
    comes round in turn and a multiple of the cell count (12 in Kuhn Poker) weighs them
    equally; the deal-known ceiling is always averaged over the instances played. With
    fresh deals (a meta env with ``repeat_instance=False``) every episode index is
    stratified so, each in its own random order (``reset(options={"instances": [...]})``:
    the cells of different hands pair up at random), and its best response is averaged over
    the instances that index was played on.
    A single-episode id counts as one episode per meta-episode. Give
    either ``agent`` or ``make_agent`` (called once per opponent with the env it plays).
    An agent with an ``act_batch`` method plays ``batch_size`` meta-episodes in lockstep
    and answers all their pending prompts in one call per turn.

    ``transcript``: a JSONL file that each finished meta-episode is appended to; the
    meta-episodes already in it are read back, not played, so a rerun after a kill ends
    with the report an uninterrupted run gives (for an agent whose answers depend only on
    its prompts). A record with other settings (env, seed, ``env_kwargs``, agent name or
    ``settings``, stratification or instance) raises ``ValueError``. ``transcript_steps``:
    against each opponent, the meta-episodes (the first by index) whose every step
    (prompts, answers) the transcript keeps; the others' records hold their results only,
    which is all a resume needs (``None``: every meta-episode's steps).
    """
    if meta_episodes < 1:
        raise ValueError(f"meta_episodes must be >= 1, got {meta_episodes}")
    if (agent is None) == (make_agent is None):
        raise ValueError("give exactly one of agent and make_agent")
    env_kwargs = dict(env_kwargs or {})
    probe = gym.make(env_id, **env_kwargs)
    game = getattr(probe.unwrapped, "game_string", None)
    num_episodes = _num_episodes(probe)
    repeats = num_episodes > 1 and bool(_wrapper_attribute(probe, "repeat_instance"))
    random_seat = getattr(probe.unwrapped, "seat_option", None) == "random"
    probe.close()
    names = resolve_opponents(game, opponents) if game else ["default"]
    instances: list[int] | list[list[int]] | None = None
    if stratify and game:
        from .oracle.winnable import stratified_instances

        instances = stratified_instances(game, meta_episodes, seed, seat_from_instance=random_seat)
        if num_episodes > 1 and not repeats:   # fresh deals: every episode index stratified on its own
            later = [_shuffled_cells(game, meta_episodes, seed + FRESH_STRIDE * k, random_seat)
                     for k in range(1, num_episodes)]
            instances = [[first, *(hand[j] for hand in later)] for j, first in enumerate(instances)]
    named = agent if agent is not None else make_agent
    assert named is not None  # exactly one of them was given
    report = EvaluationReport(env_id, agent_name or _agent_name(named), seed, num_episodes, env_kwargs,
                              stratified=instances is not None)
    log = None
    if transcript is not None:
        log = Transcript(transcript, {"env_id": env_id, "seed": seed, "env_kwargs": env_kwargs, "agent": report.agent,
                                      "agent_settings": getattr(named, "settings", None), "num_episodes": num_episodes,
                                      "stratified": report.stratified})
    bar = tqdm(total=len(names) * meta_episodes, desc=f"evaluate {env_id}", disable=not progress, unit="meta-ep")
    for name in names:
        kwargs = dict(env_kwargs) if name == "default" else {**env_kwargs, "opponent": name}
        kept = 0 if log is None else meta_episodes if transcript_steps is None else transcript_steps
        recorder = _Recorder(meta_episodes, num_episodes, keep_steps=kept)
        todo = _resume(recorder, log, name, seed, instances)
        bar.update(meta_episodes - len(todo))

        def finish(j: int, name: str = name, recorder: _Recorder = recorder) -> None:
            if log is not None:
                log.append({"opponent": name, "index": j, "seed": seed + j,
                            "reset_instance": None if instances is None else instances[j], **recorder.record(j)})
            bar.update(1)

        if todo and hasattr(agent, "act_batch"):
            envs = [gym.make(env_id, **kwargs) for _ in range(min(batch_size, len(todo)))]
            _play_batched(cast(BatchAgent, agent), envs, todo, seed, instances, recorder, finish)
        elif todo:
            envs = [gym.make(env_id, **kwargs)]
            player = agent if make_agent is None else make_agent(envs[0])
            assert player is not None
            _play(player, envs[0], todo, seed, instances, recorder, finish)
        else:
            envs = []
        for env in envs:
            env.close()
        result = recorder.result()
        if oracle and game:   # a search bot's best response is a tree search: say so while it runs
            bar.set_postfix_str(f"oracle values against {name} (best response, equilibrium, deal-known)")
            played = recorder.first_instances()
            _attach_oracle(result, game, name, env_kwargs, played if repeats else None)
            if not repeats and num_episodes > 1 and result.best_response_exact:
                result.best_response_by_episode = _on_sample_best_response(game, name, env_kwargs, recorder)
        report.opponents[name] = result
        bar.set_postfix_str("")
    bar.close()
    return report


def _resume(recorder: _Recorder, log: Transcript | None, opponent: str, seed: int,
            instances: list[int] | list[list[int]] | None) -> list[int]:
    """Load ``opponent``'s meta-episodes finished in ``log`` into ``recorder``; the indices left to play."""
    todo = []
    for j in range(len(recorder.returns)):
        record = None if log is None else log.finished.get((opponent, j))
        if record is None:
            todo.append(j)
            continue
        expected = (seed + j, None if instances is None else instances[j])
        assert log is not None  # a record came from it
        if (record["seed"], record["reset_instance"]) != expected:
            raise ValueError(f"{log.path}: meta-episode {j} against {opponent} was played with seed and instance "
                             f"{(record['seed'], record['reset_instance'])}, not {expected}; use another transcript")
        recorder.load(j, record)
    return todo


def _wrapper_attribute(env: gym.Env, name: str) -> Any:
    """``name`` of the outermost wrapper (or env) that defines it, else ``None``."""
    while True:
        if name in vars(env):
            return vars(env)[name]
        if not isinstance(env, gym.Wrapper):
            return None
        env = env.env


def _num_episodes(env: gym.Env) -> int:
    value = _wrapper_attribute(env, "num_episodes")
    return value if isinstance(value, int) else 1


def _agent_name(agent: Agent | AgentFactory) -> str:
    if isinstance(agent, type):
        return agent.__name__
    return getattr(agent, "name", None) or type(agent).__name__


class _Recorder:
    """Per-episode-index results of ``meta_episodes`` meta-episodes, filled as they finish
    (played, or read back from a transcript); the first ``keep_steps`` also keep every step."""

    def __init__(self, meta_episodes: int, n: int, keep_steps: int = 0) -> None:
        self.returns = np.zeros((meta_episodes, n))
        self.outcomes = np.empty((meta_episodes, n), dtype=object)
        self.successes = np.zeros((meta_episodes, n))
        self.act_steps = np.zeros(meta_episodes, dtype=int)
        self.invalid_steps = np.zeros(meta_episodes, dtype=int)
        self._recorded = np.zeros(meta_episodes, dtype=int)
        self._single_return = np.zeros(meta_episodes)
        #: (instance, seat) of each meta-episode's episodes, by index (games only; fresh deals
        #: give each episode its own, repeated ones the first episode's)
        self.episode_instances: dict[int, list[tuple[int, int] | None]] = {}
        self.keep_steps = keep_steps
        self.steps: dict[int, list[dict[str, Any]]] = {}
        #: token usage summed over each meta-episode's answers (kept whether its steps are or not)
        self.usage: dict[int, dict[str, int]] = {}
        self.final_observations: dict[int, str] = {}

    def start(self, j: int, info: dict[str, Any]) -> None:
        """Record the instance meta-episode ``j`` starts on (its reset ``info``)."""
        if "instance" in info:
            first = (int(info["instance"]), int(info["seat"]))
            self.episode_instances[j] = [first] + [None] * (self.returns.shape[1] - 1)

    def step(self, j: int, before: dict[str, Any], prompt: str, answer: str, reward: SupportsFloat, done: bool,
             info: dict[str, Any], usage: dict[str, Any] | None = None, observation: str = "") -> None:
        """Record meta-episode ``j``'s step: ``answer`` to ``prompt`` (whose info is ``before``),
        what it returned (``info``), and, when ``done``, the last ``observation``."""
        phase = before.get("phase", "act")
        # a meta env that starts the next episode at once reports this step's own info beside it
        invalid = info.get("finished_episode_info", info).get("invalid_action")
        if phase == "act":
            self.act_steps[j] += 1
            self.invalid_steps[j] += invalid is not None
        total = self.usage.setdefault(j, {})
        for key, value in (usage or {}).items():
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
        if j < self.keep_steps:
            self.steps.setdefault(j, []).append({"phase": phase, "episode": before.get("episode_index", 0),
                                                 "prompt": prompt, "answer": answer, "reward": float(reward),
                                                 "invalid_action": invalid, "usage": usage})
            if done:   # how the last episode ended: what no later prompt shows
                self.final_observations[j] = observation
        finished = info.get("episode_returns")
        hands = self.episode_instances.get(j)
        if hands is not None and finished is not None and len(finished) < len(hands) and "instance" in info:
            # the episode in play (a later step of it overwrites what a reflection step wrote)
            hands[len(finished)] = (int(info["instance"]), int(info["seat"]))
        if finished is None:  # a single-episode env
            self._single_return[j] += float(reward)
            if done:
                self.returns[j, 0], self.outcomes[j, 0] = self._single_return[j], info.get("outcome")
                self.successes[j, 0] = bool(info.get("success", False))
            return
        while self._recorded[j] < len(finished):
            episode = self._recorded[j]
            self.returns[j, episode] = finished[episode]
            self.successes[j, episode] = info["episode_successes"][episode]
            self.outcomes[j, episode] = _outcome_of(info, episode, finished)
            self._recorded[j] += 1

    def record(self, j: int) -> dict[str, Any]:
        """Finished meta-episode ``j`` as transcript data (what :meth:`load` reads back)."""
        steps, usage = self.steps.pop(j, []), self.usage.pop(j, {})
        hands = self.episode_instances.get(j)
        final = {"final_observation": self.final_observations.pop(j)} if j in self.final_observations else {}
        return {**final, "instance": None if hands is None else hands[0], "episode_instances": hands,
                "returns": self.returns[j].tolist(),
                "outcomes": self.outcomes[j].tolist(), "successes": self.successes[j].tolist(),
                "act_steps": int(self.act_steps[j]), "invalid_steps": int(self.invalid_steps[j]),
                "usage": usage or None, "steps": steps}

    def load(self, j: int, record: dict[str, Any]) -> None:
        """Fill meta-episode ``j`` from a transcript record."""
        self.returns[j], self.successes[j] = record["returns"], record["successes"]
        self.outcomes[j] = np.array(record["outcomes"], dtype=object)
        self.act_steps[j], self.invalid_steps[j] = record["act_steps"], record["invalid_steps"]
        # transcripts written before the episodes' instances were recorded hold the first one only
        hands = record.get("episode_instances") or ([record["instance"]] + [None] * (self.returns.shape[1] - 1)
                                                    if record["instance"] is not None else None)
        if hands is not None:
            self.episode_instances[j] = [None if pair is None else (int(pair[0]), int(pair[1])) for pair in hands]

    def first_instances(self) -> list[tuple[int, int]]:
        """(instance, seat) of each recorded meta-episode's first episode, in index order."""
        firsts = [self.episode_instances[j][0] for j in sorted(self.episode_instances)]
        return [pair for pair in firsts if pair is not None]  # a first episode always has one

    def result(self) -> OpponentResult:
        meta_episodes, n = self.returns.shape
        stderr = self.returns.std(axis=0, ddof=1) / math.sqrt(meta_episodes) if meta_episodes > 1 else np.zeros(n)
        rate = lambda label: [float(np.mean(self.outcomes[:, i] == label)) for i in range(n)]  # noqa: E731
        return OpponentResult(
            meta_episodes=meta_episodes,
            mean_return_by_episode=[float(x) for x in self.returns.mean(axis=0)],
            stderr_return_by_episode=[float(x) for x in stderr],
            success_by_episode=[float(x) for x in self.successes.mean(axis=0)],
            win_rate_by_episode=rate("win"),
            draw_rate_by_episode=rate("draw"),
            loss_rate_by_episode=rate("loss"),
            invalid_action_rate=int(self.invalid_steps.sum()) / max(int(self.act_steps.sum()), 1),
        )


def _shuffled_cells(game: str, count: int, seed: int, random_seat: bool) -> list[int]:
    """Stratified instances in a seeded random order: each cell as often as in
    :func:`~mage_envs.oracle.winnable.stratified_instances`, but not in the same place of
    every round, so that the cells of two episode indices pair up at random rather than in
    a fixed pattern."""
    import random

    from .oracle.winnable import stratified_instances

    instances = stratified_instances(game, count, seed, seat_from_instance=random_seat)
    random.Random(seed).shuffle(instances)
    return instances


def _reset_options(instances: list[int] | list[list[int]] | None, j: int) -> dict[str, Any] | None:
    """Meta-episode ``j``'s reset options: its instance, or with fresh deals each episode's."""
    if instances is None:
        return None
    chosen = instances[j]
    return {"instances": chosen} if isinstance(chosen, list) else {"instance": chosen}


def _usage(agent: object, count: int) -> list[dict[str, Any] | None]:
    """The agent's ``last_usage`` for its last ``count`` answers, else ``None`` each."""
    usage = getattr(agent, "last_usage", None)
    return list(usage) if isinstance(usage, list) and len(usage) == count else [None] * count


def _play(agent: Agent, env: gym.Env, todo: list[int], seed: int, instances: list[int] | list[list[int]] | None,
          recorder: _Recorder, finish: Callable[[int], None]) -> None:
    for j in todo:
        obs, info = env.reset(seed=seed + j, options=_reset_options(instances, j))
        recorder.start(j, info)
        done = False
        while not done:
            before, prompt, answer = info, obs, agent(obs, info)
            obs, reward, terminated, truncated, info = env.step(answer)
            done = terminated or truncated
            recorder.step(j, before, prompt, answer, reward, done, info, _usage(agent, 1)[0], obs)
        finish(j)


def _play_batched(
    agent: BatchAgent, envs: list[gym.Env], todo: list[int], seed: int, instances: list[int] | list[list[int]] | None,
    recorder: _Recorder, finish: Callable[[int], None],
) -> None:
    """Like :func:`_play`, but ``len(envs)`` meta-episodes at a time, one agent call per turn."""
    for start in range(0, len(todo), len(envs)):
        chunk = todo[start:start + len(envs)]
        state = {j: envs[k].reset(seed=seed + j, options=_reset_options(instances, j)) for k, j in enumerate(chunk)}
        for j in chunk:
            recorder.start(j, state[j][1])
        env_of = {j: envs[k] for k, j in enumerate(chunk)}
        while state:
            pending = list(state)
            answers = agent.act_batch([state[j][0] for j in pending], [state[j][1] for j in pending])
            for j, answer, usage in zip(pending, answers, _usage(agent, len(pending))):
                prompt, info = state[j]
                obs, reward, terminated, truncated, info_after = env_of[j].step(answer)
                done = terminated or truncated
                recorder.step(j, info, prompt, answer, reward, done, info_after, usage, obs)
                if done:
                    del state[j]
                    finish(j)
                else:
                    state[j] = (obs, info_after)


def _on_sample_best_response(game: str, opponent: str, env_kwargs: dict[str, Any],
                             recorder: _Recorder) -> list[float] | None:
    """Per episode index, the best response's mean expected return over the instances that
    episode index was played on (``None`` without chance events or a full record)."""
    import pyspiel

    from .facts import load_game
    from .oracle.winnable import best_response_instance_value

    if load_game(game).get_type().chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC:
        return None
    played = [[pair for pair in hands if pair is not None] for hands in recorder.episode_instances.values()]
    meta_episodes, num_episodes = recorder.returns.shape
    if len(played) < meta_episodes or any(len(hands) < num_episodes for hands in played):
        return None   # an episode without its instance (a transcript written before they were kept)
    scale = float(env_kwargs.get("reward_scale", 1.0))
    return [scale * float(np.mean([best_response_instance_value(game, opponent, *hands[i]) for hands in played]))
            for i in range(num_episodes)]


def _outcome_of(info: dict[str, Any], episode: int, finished: list[float]) -> str:
    """The outcome of finished inner episode ``episode`` (sign of its return if not reported)."""
    reported = info.get("episode_outcomes", [None] * len(finished))[episode]
    if reported is not None:
        return reported
    value = finished[episode]
    return "win" if value > 0 else "loss" if value < 0 else "draw"


def _attach_oracle(
    result: OpponentResult, game: str, opponent: str, env_kwargs: dict[str, Any],
    instances: list[tuple[int, int]] | None,
) -> None:
    """Oracle values beside ``result``; ``instances`` (repeat-instance runs): the (instance,
    seat) pairs played, over which the deal-known ceiling is averaged."""
    from .oracle import best_response_value, equilibrium_value
    from .oracle.winnable import instance_value

    seat = env_kwargs.get("seat", "random")
    scale = float(env_kwargs.get("reward_scale", 1.0))
    value = best_response_value(game, opponent, seat)
    result.best_response_value = value.value * scale
    result.best_response_stderr = value.stderr * scale
    result.best_response_exact = value.exact
    seats = (0, 1) if seat == "random" else (int(seat),)
    result.equilibrium_value = scale * sum(equilibrium_value(game, s) for s in seats) / len(seats)
    if instances and value.exact:
        result.instance_optimal_value = scale * float(np.mean([instance_value(game, opponent, k, s) for k, s in instances]))
