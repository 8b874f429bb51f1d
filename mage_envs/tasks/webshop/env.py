"""WebShop as a text environment (``mage/WebShop-v0``, ``mage/WebShop-OOD-v0`` and their
``-meta-v0`` ids, which replay one instruction in every episode of a meta-episode).

Each episode is one instruction (see :mod:`~mage_envs.tasks.webshop.goals`), drawn from
its instance number, in a store of thousands of products (generated, or WebShop's own
files with ``catalog_path=``). The prompt holds the rules, the instruction, the current
page, the last actions, the legal actions and the answer format
``<action>click[buy now]</action>``.

* **Actions**: ``search[query]`` on any page (as WebShop's text env), ``click[element]``
  for an element of the page (what is legal where: :mod:`~mage_envs.tasks.webshop.pages`;
  how answers are read: :mod:`~mage_envs.tasks.webshop.actions`). ``info["legal_actions"]``
  lists the form ``search[<your query>]`` first, then the clicks as ``click[element]``.
  Any other answer is an *invalid action*, handled by ``invalid_action`` (retry, forfeit
  or fallback); a retried answer is not a step. A fallback that draws the search form
  searches for the instruction itself.
* **Reward**: WebShop's (:mod:`~mage_envs.tasks.webshop.reward`), paid at ``buy now``;
  0 at every other step. A forfeit pays ``penalty`` plus ``forfeit_return`` (default 0,
  what buying nothing is worth).
* **End**: ``terminated`` at ``buy now`` (outcome ``"win"`` when the reward is 1, else
  ``"loss"``) or at a forfeit (``"loss"``); ``truncated`` after ``max_steps`` actions
  (default 15, as WebShop in verl-agent) without a purchase (``"loss"``, reward 0).
  ``success`` is ``reward == 1``.
* **info**: ``legal_actions``, ``invalid_action``, ``instance``, ``opponent=None``,
  ``seat=0``, ``page`` (the page's kind); at the end ``outcome``, ``success``,
  ``forfeit``, ``summary`` (one line for the meta-episode memory) and, after a purchase,
  ``purchase`` (the product, the options and the reward's parts).
* **Options for small models** (:mod:`~mage_envs.tasks.base`): ``instruction_search=True``
  lists, instead of the form, ``search[<the instruction without its price clause>]`` (the
  expert's first query): every legal action is then a complete action, and a model that
  writes may still search for any query. ``action_labels="numbers"`` numbers the legal
  actions (a model that samples one token picks one by its number). ``instance_split``
  ``"train"`` / ``"eval"`` draws the instructions of one half of the split's products
  (:meth:`~mage_envs.tasks.webshop.shop.Shop.pool`: disjoint, by the id's hash); the OOD
  split is disjoint from training by kind already.
* **Seeding**: ``reset(seed=s)`` seeds ``np_random``; the instance numbers and the random
  fallback action come from a generator derived from it. ``reset(options={"instance": k})``
  replays instruction ``k`` of the split exactly.

The store is shared by every env of a process (:func:`~mage_envs.tasks.webshop.shop.open_shop`)
and is not pickled: an unpickled env reopens it from the cache (or rebuilds it).

Example:
    >>> env = WebShopEnv(num_products=300)
    >>> obs, info = env.reset(seed=0)
    >>> info["legal_actions"], info["page"]
    (['search[<your query>]'], 'search')
    >>> for action in env.expert_actions():
    ...     obs, reward, terminated, truncated, info = env.step(f"<action>{action}</action>")
    >>> reward, terminated, info["success"], info["purchase"]["reward"]
    (1.0, True, True, 1.0)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from gymnasium import spaces

from ...core.contract import InvalidActionPolicy, clip_text, text_space
from ...core.parsing import ParsedAction
from ..base import TextTaskEnv, check_settings, label_room
from .actions import normalize_element, normalize_query, read_answer
from .catalog import DEFAULT_NUM_PRODUCTS, Product
from .expert import expert_plan, expert_query
from .goals import SPLITS, Goal
from .pages import Browse, clickables
from .reward import RewardBreakdown, webshop_reward
from .shop import Shop, open_shop
from .text import (
    INSTRUCTION_CHARS,
    history_block,
    legal_block,
    observation_budget,
    page_block,
    plain,
    purchase_line,
    rules,
)

#: The search entry of ``info["legal_actions"]`` (on every page).
SEARCH_FORM = "search[<your query>]"
_END_LINES = {
    "truncated": "Out of actions: nothing was bought (reward 0). The episode is over.",
    "forfeit": "You forfeited this episode by not answering with a legal action.",
}


class WebShopEnv(TextTaskEnv):
    """Single-agent WebShop with a text prompt and text answers.

    Args:
        split: ``"train"`` or ``"ood"``: whose instructions to draw (the OOD split names
            only products of held-out kinds; see :mod:`~mage_envs.tasks.webshop.goals`).
        max_steps: actions before the episode is truncated.
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"``, a dict or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        accept_bare: accept an answer that is exactly one action without tags.
        history_length: actions of the current episode shown in the prompt (the last ones).
        num_products: size of the generated catalog (when ``catalog_path`` is None).
        catalog_path: WebShop's data files (a folder, or its products file) to use instead
            of the generated catalog; see :func:`~mage_envs.tasks.webshop.loader.load_webshop_catalog`.
        human_goals: with ``catalog_path``, draw WebShop's human instructions (else its
            synthetic ones).
        render_mode: ``None`` or ``"ansi"``.
        action_labels: ``"none"`` or ``"numbers"`` (see :class:`~mage_envs.tasks.base.TextTaskEnv`).
        instance_split: ``"all"``, or ``"train"`` / ``"eval"``: the instructions of one half of
            the split's products (see above).
        instruction_search: list ``search[<the instruction>]`` instead of the search form.
        prompt_style: ``"full"`` or ``"compact"`` (no rules; see :class:`~mage_envs.tasks.base.TextTaskEnv`).
    """

    task_name: ClassVar[str] = "WebShop"

    def __init__(
        self,
        split: str = "train",
        max_steps: int = 15,
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        accept_bare: bool = True,
        history_length: int = 5,
        num_products: int = DEFAULT_NUM_PRODUCTS,
        catalog_path: str | Path | None = None,
        human_goals: bool = True,
        render_mode: str | None = None,
        action_labels: str = "none",
        instance_split: str = "all",
        prompt_style: str = "full",
        instruction_search: bool = False,
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be 'train' or 'ood', got {split!r}")
        check_settings(render_mode, ("max_steps", max_steps, 1), ("history_length", history_length, 1))
        self.split = split
        super().__init__(max_steps, history_length, invalid_action, accept_bare, render_mode, action_labels,
                         instance_split, prompt_style)
        self.instruction_search = bool(instruction_search)
        if catalog_path is None:
            self._store_key: tuple = (None, num_products, True)
        else:
            self._store_key = (str(Path(catalog_path).resolve()), DEFAULT_NUM_PRODUCTS, bool(human_goals))
        self._shop = open_shop(*self._store_key)
        if not self._shop.pool(split, instance_split):
            raise ValueError(f"the catalog {self._shop.catalog.name!r} has no instructions for split {split!r} "
                             f"(instance_split {instance_split!r})")
        self.observation_space: spaces.Text = text_space(observation_budget(self.max_steps, self.history_length)
                                                         + label_room(action_labels))
        self._rules = rules(self.max_steps)
        self._goal: Goal | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_shop"]  # shared and rebuilt from the cache, never copied
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._shop = open_shop(*self._store_key)

    # ------------------------------------------------------------------ introspection
    @property
    def shop(self) -> Shop:
        """The store (catalog, search, instructions)."""
        return self._shop

    @property
    def goal(self) -> Goal:
        """The current instruction's goal (what the reward compares the purchase with)."""
        if self._goal is None:
            raise RuntimeError("call reset() first")
        return self._goal

    @property
    def browse(self) -> Browse:
        """The current page and what was chosen on it."""
        return self._browse

    def expert_actions(self) -> list[str]:
        """Actions that buy the best product the expert finds, with the goal's options,
        from the current page (``[]`` once the episode is over); see
        :mod:`~mage_envs.tasks.webshop.expert`."""
        if self._outcome is not None:
            return []
        return expert_plan(self._shop, self.goal, self._browse)

    # ------------------------------------------------------------------ hooks
    @property
    def _started(self) -> bool:
        return self._goal is not None

    def _start(self, instance: int) -> None:
        self._goal = self._shop.goal(self.split, instance, self.instance_split)
        self._browse = Browse()
        self._score: RewardBreakdown | None = None

    def _legal_actions(self) -> list[str]:
        search = f"search[{expert_query(self.goal)}]" if self.instruction_search else SEARCH_FORM
        return [search, *(f"click[{element}]" for element in self._clickables())]

    def _split_draw(self, instance: int) -> int:
        """Any instance: the split is in the instructions' pool (:meth:`Shop.pool`)."""
        return instance

    def _in_split(self, instance: int) -> bool:
        return True

    def _read(self, answer: str) -> ParsedAction:
        return read_answer(
            answer, self._browse.page != "done", self._clickables(), self._aliases(), self.accept_bare
        )

    def _apply(self, action: str, reward: float) -> tuple[float, str | None]:
        self._history.append(action)
        argument = action[action.index("[") + 1 : -1]
        if action.startswith("search["):
            self._browse = self._browse.searched(argument, self._shop.search(argument))
        else:
            clicked = next((a for a in self._browse.shown if a.lower() == argument), None)
            product = self._shop.product(clicked) if self._browse.page == "results" and clicked else self._open_product()
            self._browse = self._browse.clicked(argument, product)
        if self._browse.page != "done":
            return reward, None
        self._score = webshop_reward(self._bought(), self.goal, dict(self._browse.chosen))
        return reward + self._score.reward, "win" if self._score.reward == 1.0 else "loss"

    def _fallback_action(self, legal_action: str) -> str:
        """For the search form, a search for the instruction itself."""
        if legal_action == SEARCH_FORM:
            return f"search[{normalize_query(self.goal.instruction)}]"
        return legal_action

    def _info_extras(self) -> dict[str, Any]:
        return {"page": self._browse.page}

    # ------------------------------------------------------------------ internals
    def _open_product(self) -> Product | None:
        return self._shop.product(self._browse.asin) if self._browse.asin else None

    def _bought(self) -> Product:
        """The product open when "buy now" was clicked (buying happens on its page)."""
        product = self._open_product()
        if product is None:
            raise RuntimeError("no product is open")
        return product

    def _purchase(self) -> tuple[Product, RewardBreakdown]:
        """The bought product and its score, once the episode ended with a purchase."""
        if self._score is None:
            raise RuntimeError("nothing was bought")
        return self._bought(), self._score

    def _clickables(self) -> list[str]:
        return clickables(self._browse, self._open_product())

    def _aliases(self) -> dict[str, str]:
        """On a results page, each shown product's title (as clickables spell names) -> its id."""
        if self._browse.page != "results":
            return {}
        aliases: dict[str, str] = {}
        for asin in self._browse.shown:
            aliases.setdefault(normalize_element(self._shop.product(asin).title), asin.lower())
        return aliases

    def _shown_products(self) -> list[Product]:
        return [self._shop.product(asin) for asin in self._browse.shown] if self._browse.page == "results" else []

    def _compose(self, notice: str | None) -> str:
        if self._browse.page == "done":
            product, score = self._purchase()
            page = purchase_line(product, dict(self._browse.chosen), score)
        else:
            page = page_block(self._browse, self._open_product(), self._shown_products())
        parts = [
            *self._head(),
            f"Instruction: {plain(self.goal.instruction, INSTRUCTION_CHARS)}",
            "",
            f"Actions used: {self._steps} of {self.max_steps}.",
            page,
            "",
            history_block(self._history, self.history_length),
            "",
        ]
        if self._outcome is None:
            parts.append(legal_block(self._listed_actions(), notice, self._label_note()))
        elif self._browse.page != "done":
            parts.append(_END_LINES["forfeit" if self._forfeited else "truncated"])
        return clip_text("\n".join(parts), self.observation_space.max_length)

    def _summary(self) -> str:
        """The finished episode for the meta-episode memory: what was bought and how it
        scored, then the actions taken (what a later attempt can repeat or change)."""
        actions = f" Actions: {' -> '.join(clip_text(a, 60, marker='...]') for a in self._history)}."
        if self._score is None:
            head = "Forfeited by invalid answers." if self._forfeited else f"Bought nothing in {self.max_steps} actions."
            return head + (actions if self._history else "")
        product, score = self._purchase()
        options = ", ".join(value for _, value in self._browse.chosen) or "no options"
        return (
            f"Bought {clip_text(product.title, 60)} ({clip_text(options, 60)}) at {product.price_tag}: "
            f"{score.attributes_matched}/{score.attributes_total} attributes, "
            f"{score.options_matched}/{score.options_total} options, price {'ok' if score.price_ok else 'too high'}, "
            f"type factor {score.r_type:g}.{actions}"
        )

    def _info(self, report: dict[str, Any] | None) -> dict[str, Any]:
        info = super()._info(report)
        if self._score is not None:
            info["purchase"] = {
                "asin": self._browse.asin,
                "options": dict(self._browse.chosen),
                "price": self._bought().price,
                **self._score.as_dict(),
            }
        return info


def make_ood_env(**kwargs: Any) -> WebShopEnv:
    """``WebShopEnv(split="ood", ...)``: the entry point of ``mage/WebShop-OOD-v0``.

    Example:
        >>> make_ood_env(num_products=300).split
        'ood'
    """
    return WebShopEnv(split="ood", **kwargs)
