"""Agents built on a :class:`~mage_agent.policy.Policy`, for the ``mage_envs`` harness.

* :class:`PolicyAgent` — the trained (or untrained) model, answering a whole batch of
  prompts with one ``generate`` call of its :class:`~mage_agent.sampling.Sampler` (the
  harness plays meta-episodes in lockstep);
* :func:`react_agent`, :func:`reflexion_agent` — the paper's prompting baselines for any
  model with frozen weights: ReAct (think, then act) and Reflexion (reflection memory).

Example:
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> from mage_agent.policy import Policy
    >>> from mage_agent.sampling import Sampling
    >>> tok = build_tokenizer(["check bet"])
    >>> agent = PolicyAgent(Policy(build_model(tok), tok), Sampling(max_new_tokens=1), action_tokens=True)
    >>> agent.act_batch(["check or bet?"], [{"legal_actions": ["check", "bet"], "phase": "act"}])[0] in ("check", "bet")
    True
"""

from __future__ import annotations

import itertools
from typing import Any

from mage_envs.agents.prompting import REACT_INSTRUCTIONS, REFLEXION_INSTRUCTIONS

from .policy import Policy
from .sampling import Sampler, Sampling, TorchSampler


class PolicyAgent:
    """Answers prompts with a policy; ``act_batch`` makes one batched generate call of
    ``sampler`` (default: ``TorchSampler(policy)``)."""

    def __init__(
        self,
        policy: Policy,
        sampling: Sampling,
        action_tokens: bool = False,
        instructions: str = "",
        seed: int = 0,
        name: str = "policy",
        answer_prefix: str = "",
        answer_question: bool = False,
        sampler: Sampler | None = None,
    ) -> None:
        """``instructions`` are appended to acting prompts; in free text, ``answer_question``
        closes them with :data:`ANSWER_QUESTION` and ``answer_prefix`` starts the answers.
        None of them touches reflection prompts."""
        self.policy = policy
        self.sampler = TorchSampler(policy) if sampler is None else sampler
        self.answer_prefix = "" if action_tokens else answer_prefix
        self.answer_question = answer_question and not action_tokens
        self.sampling = sampling
        self.action_tokens = action_tokens
        self.instructions = instructions
        self.name = name
        self._seeds = itertools.count(seed * 1_000_003)

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        prompts = [
            obs + (self.instructions if info.get("phase", "act") == "act" else "")
            for obs, info in zip(observations, infos)
        ]
        if self.answer_question:
            prompts = [with_question(prompt, info) for prompt, info in zip(prompts, infos)]
        allowed = [action_token_ids(self.policy, info) for info in infos] if self.action_tokens else None
        generations = self.sampler.generate(prompts, self.sampling, allowed_ids=allowed, seed=next(self._seeds),
                                            prefixes=answer_prefixes(infos, self.answer_prefix))
        return [g.text for g in generations]

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]


def action_token_ids(policy: Policy, info: dict[str, Any]) -> list[int] | None:
    """The tokens a one-token answer may take on this turn: one per legal action, the
    labels' (``info["action_labels"]``, e.g. ``"1"``, ``"2"``: a task's numbered actions)
    when the env gives them, else the names'; ``None`` on a reflection, once the episode is
    over, or when the names are not single tokens and there are no labels. Labels that are
    not single (known) tokens raise ``ValueError`` (a tokenizer that splits ``"12"``, as SmolLM2's
    does, cannot pick the twelfth action in one token: answer in free text instead).

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> tok = build_tokenizer(["1 2 open fridge"])
        >>> policy = Policy(build_model(tok), tok)
        >>> info = {"phase": "act", "legal_actions": ["open fridge 1", "open fridge 2"], "action_labels": ["1", "2"]}
        >>> action_token_ids(policy, info) == [tok.convert_tokens_to_ids(w) for w in ("1", "2")]
        True
    """
    legal = info.get("legal_actions")
    if info.get("phase", "act") != "act" or not legal:
        return None
    labels = info.get("action_labels")
    if not labels:
        return policy.single_token_ids(legal)
    ids = policy.single_token_ids(labels)
    unknown = policy.tokenizer.unk_token_id
    if ids is None or unknown in ids:
        long = next(label for label, tokens in zip(labels, policy.encode_words(labels))
                    if len(tokens) != 1 or tokens[0] == unknown)
        raise ValueError(f"the action label {long!r} is not one token of this tokenizer: one-token answers "
                         f"(action_tokens) cannot pick among {len(labels)} numbered actions; answer in free text "
                         "(action_tokens: false), or use a tokenizer that holds every label as one word (the "
                         "embedded tiny model of a task run holds 1 to 300)")
    return ids


#: The last line that free-text acting prompts get with ``answer_question`` (it names the
#: legal actions; ``benchmarks/free_text.py`` measured it, with the answer prefix, at 0 of 24
#: invalid answers from SmolLM2-135M against 12% without it).
ANSWER_QUESTION = "\nWhich action do you choose: {options}?"


def with_question(observation: str, info: dict[str, Any]) -> str:
    """``observation`` closed by :data:`ANSWER_QUESTION` on an acting turn; unchanged otherwise.

    Example:
        >>> with_question("Your card: King.", {"phase": "act", "legal_actions": ["check", "bet"]})
        'Your card: King.\\nWhich action do you choose: check or bet?'
    """
    legal = info.get("legal_actions")
    if info.get("phase", "act") != "act" or not legal:
        return observation
    return observation + ANSWER_QUESTION.format(options=" or ".join(legal))


def choice_token_ids(policy: Policy, info: dict[str, Any]) -> list[int] | None:
    """Where a free-text answer's choice starts: the distinct first tokens of the legal
    actions' names (and of their labels when the env numbers them: an answer may give
    either); ``None`` on a reflection or once the episode is over. The entropy bonus of a
    free-text answer is taken over these.

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> tok = build_tokenizer(["check bet"])
        >>> policy = Policy(build_model(tok), tok)
        >>> info = {"phase": "act", "legal_actions": ["check", "bet"]}
        >>> choice_token_ids(policy, info) == sorted(tok.convert_tokens_to_ids(w) for w in ("check", "bet"))
        True
        >>> choice_token_ids(policy, {"phase": "reflect"}) is None
        True
    """
    legal = info.get("legal_actions")
    if info.get("phase", "act") != "act" or not legal:
        return None
    return policy.first_token_ids(list(legal) + list(info.get("action_labels") or []))


def answer_prefixes(infos: list[dict[str, Any]], prefix: str) -> list[str] | None:
    """``prefix`` for each acting turn and ``""`` for a reflection; ``None`` without a prefix.

    Example:
        >>> answer_prefixes([{"phase": "act"}, {"phase": "reflect"}], "<action>")
        ['<action>', '']
    """
    if not prefix:
        return None
    return [prefix if info.get("phase", "act") == "act" else "" for info in infos]


def react_agent(policy: Policy, sampling: Sampling, seed: int = 0) -> PolicyAgent:
    """ReAct-style prompting: reason first, then act; no memory beyond the env's."""
    return PolicyAgent(policy, sampling, instructions=REACT_INSTRUCTIONS, seed=seed, name="react")


def reflexion_agent(policy: Policy, sampling: Sampling, seed: int = 0) -> PolicyAgent:
    """Reflexion-style prompting: frozen weights, reflections kept in the meta-episode's
    memory (use it on a ``-meta-v0`` id with ``reflection=True``) and consulted each move."""
    return PolicyAgent(policy, sampling, instructions=REFLEXION_INSTRUCTIONS, seed=seed, name="reflexion")
