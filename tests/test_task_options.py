"""The options every single-agent task shares (numbered actions, train / eval instance
splits) and what each task's memory keeps of a finished attempt."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest
from task_helpers import act, play

import mage_envs  # noqa: F401  (registers the task ids)
from mage_envs.tasks.base import LABEL_NOTE, labelled, split_half
from mage_envs.tasks.household.tasks import TASK_TYPES
from mage_envs.tasks.sokoban import SokobanEnv, generate_level, parse_xsb
from mage_envs.tasks.webshop import SEARCH_FORM, WebShopEnv
from mage_envs.tasks.webshop.expert import expert_query
from mage_envs.tasks.webshop.shop import open_shop, product_half

#: Scripted level: the box two squares right of the player, its goal beyond it.
CORRIDOR = "######\n#@$ .#\n######"
needs_textworld = pytest.mark.skipif(importlib.util.find_spec("textworld") is None,
                                     reason="needs the household extra (textworld)")


# ---------------------------------------------------------------- action labels
def test_numbered_moves_are_listed_reported_and_read_back() -> None:
    env = SokobanEnv(levels=[CORRIDOR], action_labels="numbers")
    obs, info = env.reset(seed=0)
    assert "Legal actions: 1: up, 2: down, 3: left, 4: right" in obs and LABEL_NOTE in obs
    assert info["legal_actions"] == ["up", "down", "left", "right"] and info["action_labels"] == ["1", "2", "3", "4"]
    obs, reward, *_ = env.step("4")  # bare label: right, the box moves one square
    assert env.level.player == 8 and round(reward, 2) == -0.1
    obs, reward, terminated, _, info = env.step("<action>right</action>")  # the names stay legal
    assert terminated and info["success"] and "action_labels" in info and info["action_labels"] == []


def test_a_label_outside_the_list_is_an_invalid_answer() -> None:
    env = SokobanEnv(levels=[CORRIDOR], action_labels="numbers")
    env.reset(seed=0)
    _, _, _, _, info = env.step("<action>5</action>")
    assert info["invalid_action"]["reason"] == "illegal_action" and env.steps == 0


def test_without_labels_the_prompt_and_info_are_unchanged() -> None:
    obs, info = SokobanEnv(levels=[CORRIDOR]).reset(seed=0)
    assert "Legal actions: up, down, left, right\n" in obs and LABEL_NOTE not in obs and "action_labels" not in info
    assert labelled(["up"], []) == ["up"]


@pytest.mark.parametrize("name, value", [("action_labels", "letters"), ("instance_split", "test"),
                                         ("prompt_style", "terse")])
def test_unknown_option_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        SokobanEnv(**{name: value})


# ---------------------------------------------------------------- instance splits
def rooms(split: str, seeds: range) -> dict[int, str]:
    """Instance -> room (XSB) drawn by ``reset(seed=s)`` in ``split``."""
    env = SokobanEnv(instance_split=split)
    drawn = {}
    for seed in seeds:
        env.reset(seed=seed)
        drawn[env._instance] = env.level.to_xsb()
    return drawn


def test_train_and_eval_draw_disjoint_rooms_and_all_draws_as_before() -> None:
    train, held = rooms("train", range(300)), rooms("eval", range(300))
    assert len(train) == len(held) == 300
    assert {split_half(room) for room in train.values()} == {"train"}
    assert {split_half(room) for room in held.values()} == {"eval"}
    assert not set(train.values()) & set(held.values())  # no room in both, whatever its number
    assert len(set(train.values())) < len(train)  # small rooms do repeat across instance numbers
    before = {SokobanEnv().reset(seed=s)[1]["instance"] for s in range(200)}
    assert set(rooms("all", range(200))) == before


def test_an_instance_outside_the_split_is_refused() -> None:
    env = SokobanEnv(instance_split="train")
    inside = next(k for k in range(50) if split_half(generate_level(k).level.to_xsb()) == "train")
    outside = next(k for k in range(50) if split_half(generate_level(k).level.to_xsb()) == "eval")
    assert env.reset(options={"instance": inside})[1]["instance"] == inside
    with pytest.raises(ValueError, match="not in instance_split 'train'"):
        env.reset(options={"instance": outside})


def test_a_pool_without_instances_of_the_split_is_refused() -> None:
    env = SokobanEnv(levels=[CORRIDOR], instance_split="eval" if split_half(
        parse_xsb(CORRIDOR).to_xsb()) == "train" else "train")
    with pytest.raises(ValueError, match="the pool is too small to split"):
        env.reset(seed=0)


def test_the_meta_episode_replays_its_room_inside_the_split() -> None:
    env = gym.make("mage/Sokoban-meta-v0", instance_split="eval", max_steps=2, reflection=False)
    _, info = env.reset(seed=3)
    seen = {info["instance"]}
    while not info["meta_done"]:
        _, _, _, _, info = env.step("up")
        seen.add(info["instance"])
    assert len(seen) == 1 and split_half(generate_level(seen.pop()).level.to_xsb()) == "eval"


def test_webshop_halves_split_the_products_and_their_instructions() -> None:
    shop = open_shop(num_products=300)
    train, held = shop.pool("train", "train"), shop.pool("train", "eval")
    assert train and held and len(train) + len(held) == len(shop.pool("train"))
    assert all(product_half(s.asin) == "train" for s in train) and all(product_half(s.asin) == "eval" for s in held)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_webshop_goals_come_from_their_half_only(split: str) -> None:
    env = WebShopEnv(num_products=300, instance_split=split)
    asins = set()
    for seed in range(60):
        env.reset(seed=seed)
        asins.add(env.goal.asin)
    assert len(asins) > 20 and {product_half(a) for a in asins} == {split}


# ---------------------------------------------------------------- WebShop's search for the instruction
def test_instruction_search_lists_a_complete_search_and_its_label_plays_it() -> None:
    env = WebShopEnv(num_products=300, instruction_search=True, action_labels="numbers")
    obs, info = env.reset(seed=1)
    query = expert_query(env.goal)
    assert info["legal_actions"] == [f"search[{query}]"] and f"1: search[{query}]" in obs
    _, _, _, _, info = env.step("1")
    assert info["page"] == "results" and env.browse.query == query
    _, _, _, _, info = env.step("<action>search[red mug]</action>")  # a writer's own query still works
    assert env.browse.query == "red mug" and info["legal_actions"][0] == f"search[{query}]"


def test_the_labelled_search_form_searches_for_the_instruction() -> None:
    env = WebShopEnv(num_products=300, action_labels="numbers")
    _, info = env.reset(seed=1)
    assert info["legal_actions"] == [SEARCH_FORM]
    env.step("1")
    assert env.browse.page == "results" and env.browse.query.startswith(expert_query(env.goal)[:20])


# ---------------------------------------------------------------- memory
def test_sokoban_memory_holds_the_moves_and_where_the_boxes_ended() -> None:
    env = gym.make("mage/Sokoban-meta-v0", levels=[CORRIDOR], max_steps=3, reflection=False, num_episodes=2)
    env.reset(seed=0)
    obs = play(env, [act("up"), act("right"), act("up")])[-1][0]  # the first prompt of attempt 2
    assert ("Memory of earlier episodes:\n[Episode 1] Not solved after 3 moves. Boxes ended at row 2 column 4 "
            "(off a goal). Moves: up, right, up. Result: loss, return -0.3.\n\n[Episode 2 of 2]") in obs
    assert obs.startswith("You are playing Sokoban")  # the rules stay above the memory


def test_sokoban_summary_of_a_solved_room() -> None:
    env = SokobanEnv(levels=[CORRIDOR])
    env.reset(seed=0)
    *_, info = play(env, [act("right"), act("right")])[-1]
    assert info["summary"] == "Solved in 2 moves. Boxes ended at row 2 column 5 (on a goal). Moves: right x2."


def test_webshop_memory_holds_the_purchase_and_the_actions() -> None:
    env = WebShopEnv(num_products=300)
    env.reset(seed=1)
    plan = env.expert_actions()
    *_, info = play(env, [act(a) for a in plan])[-1]
    search = plan[0][:56] + "...]"  # actions are clipped to 60 characters
    assert len(plan[0]) > 60 and info["summary"].startswith("Bought ")
    assert info["summary"].endswith(" Actions: " + " -> ".join([search, *plan[1:]]) + ".")


@needs_textworld
def test_household_numbers_its_commands_and_remembers_what_changed() -> None:
    env = gym.make("mage/Household-v0", action_labels="numbers", max_steps=4)
    obs, info = env.reset(options={"instance": 3})
    legal = info["legal_actions"]
    assert info["action_labels"] == [str(i) for i in range(1, len(legal) + 1)]
    assert f"Legal actions: 1: {legal[0]}, 2: {legal[1]}," in obs
    take = legal.index("take remotecontrol 1 from shelf 1") + 1
    steps = play(env, ["look", str(take), "inventory", "<action>examine sofa 1</action>"])
    info = steps[-1][4]
    assert info["summary"] == ("Task 'put a remotecontrol on sofa 1.' not done after 4 actions. Commands that "
                               "changed something: take remotecontrol 1 from shelf 1.")


@needs_textworld
def test_household_splits_its_games_by_their_content() -> None:
    env = gym.make("mage/Household-v0", instance_split="eval", num_games=8)
    drawn = {env.reset(seed=s)[1]["instance"] for s in range(12)}
    assert drawn and {split_half(env.unwrapped._split_key(k)) for k in drawn} == {"eval"}


@pytest.mark.parametrize("env_id, kwargs", [
    ("mage/Sokoban-v0", {}),
    ("mage/WebShop-v0", {"num_products": 300}),
    pytest.param("mage/Household-v0", {}, marks=needs_textworld),
])
def test_the_compact_style_is_the_full_prompt_without_its_rules(env_id: str, kwargs: dict) -> None:
    full, compact = gym.make(env_id, **kwargs), gym.make(env_id, prompt_style="compact", **kwargs)
    for seed in range(3):
        full_obs, full_info = full.reset(seed=seed)
        compact_obs, compact_info = compact.reset(seed=seed)
        rules = full.unwrapped.prompt_preamble
        assert rules and compact.unwrapped.prompt_preamble == "" and rules not in compact_obs
        assert full_obs == rules + "\n\n" + compact_obs and full_info == compact_info
        action = f"<action>{full_info['legal_actions'][-1]}</action>"
        assert full.step(action)[0] == rules + "\n\n" + compact.step(action)[0]


def test_a_compact_meta_episode_opens_with_its_episode_and_keeps_the_memory() -> None:
    env = gym.make("mage/Sokoban-meta-v0", levels=[CORRIDOR], prompt_style="compact", reflection=False, max_steps=4)
    obs, _ = env.reset(seed=0)
    assert obs.startswith("[Episode 1 of 3]\n")
    for move in ("right", "right"):
        obs = env.step(f"<action>{move}</action>")[0]
    assert obs.startswith("Memory of earlier episodes:\n[Episode 1] Solved in 2 moves.")
    mage_envs.check_text_env(env)


@pytest.mark.parametrize("env_id, kwargs", [
    ("mage/Sokoban-meta-v0", {"action_labels": "numbers", "instance_split": "eval", "max_steps": 6}),
    ("mage/Sokoban-meta-v0", {"prompt_style": "compact", "max_steps": 6}),
    ("mage/WebShop-meta-v0", {"num_products": 300, "action_labels": "numbers", "instruction_search": True,
                              "instance_split": "train", "max_steps": 5}),
])
def test_labelled_split_envs_follow_the_text_contract(env_id: str, kwargs: dict) -> None:
    mage_envs.check_text_env(gym.make(env_id, **kwargs))


# ---------------------------------------------------------------- Household: learning-signal options
@needs_textworld
def test_household_without_looking_commands_lists_only_commands_that_act() -> None:
    full = gym.make("mage/Household-v0", action_labels="numbers")
    _, every = full.reset(options={"instance": 3})
    env = gym.make("mage/Household-v0", action_labels="numbers", looking_commands=False, max_steps=5)
    obs, info = env.reset(options={"instance": 3})
    acting = [c for c in every["legal_actions"] if not c.startswith(("look", "inventory", "examine "))]
    assert info["legal_actions"] == acting and len(acting) < len(every["legal_actions"])
    assert info["action_labels"] == [str(i) for i in range(1, len(acting) + 1)]
    assert f"Legal actions: 1: {acting[0]}, 2: {acting[1]}," in obs and "examine" not in obs.split("Legal actions:")[1]
    assert "commands that only look (look, inventory, examine) are not offered" in obs
    assert "inventory lists" not in obs and "inventory lists" in full.reset(options={"instance": 3})[0]
    _, _, _, _, info = env.step(act("look"))  # a looking command is no longer an answer
    assert info["invalid_action"]["reason"] == "illegal_action" and env.unwrapped.steps == 0
    take = info["legal_actions"].index("take remotecontrol 1 from shelf 1") + 1
    _, _, _, _, info = env.step(str(take))
    put = info["legal_actions"].index("put remotecontrol 1 on sofa 1") + 1
    _, reward, terminated, _, info = env.step(str(put))
    assert reward == 1.0 and terminated and info["summary"] == (
        "Task 'put a remotecontrol on sofa 1.' done in 2 actions. Commands that changed something: "
        "take remotecontrol 1 from shelf 1, put remotecontrol 1 on sofa 1.")


@needs_textworld
def test_household_memory_without_looking_commands_carries_the_first_attempt() -> None:
    env = gym.make("mage/Household-meta-v0", num_episodes=2, max_steps=2, looking_commands=False,
                   action_labels="numbers", reflection=False)
    obs, info = env.reset(options={"instance": 3})
    for command in ("open drawer 1", "take remotecontrol 1 from shelf 1"):
        obs, _, _, _, info = env.step(str(info["legal_actions"].index(command) + 1))
    assert info["episode_index"] == 1 and info["legal_actions"] and "look" not in info["legal_actions"]
    assert ("Task 'put a remotecontrol on sofa 1.' not done after 2 actions. Commands that changed something: "
            "open drawer 1, take remotecontrol 1 from shelf 1.") in obs


@needs_textworld
def test_household_draws_only_the_chosen_task_types_and_expert_lengths() -> None:
    from mage_envs.tasks.household.tasks import make_task

    env = gym.make("mage/Household-v0", num_games=60, task_types=["pick_and_place_simple", "pick_heat_then_place_in_recep"],
                   max_expert_steps=3)
    drawn = {env.unwrapped._draw_instance() for _ in range(40)}  # what reset() draws from
    pool = [k for k in range(60) if make_task(k).task_type in ("pick_and_place_simple", "pick_heat_then_place_in_recep")
            and len(make_task(k).walkthrough) <= 3]
    assert drawn <= set(pool) and len(drawn) > len(pool) // 2
    assert env.unwrapped._pool == pool
    env.reset(seed=0)
    assert len(env.unwrapped.expert_actions()) <= 3
    outside = next(k for k in range(60) if k not in pool)
    with pytest.raises(ValueError, match=f"instance {outside} is a .* outside task_types"):
        env.reset(options={"instance": outside})


@needs_textworld
def test_household_selection_of_every_game_draws_as_before() -> None:
    default = gym.make("mage/Household-v0", num_games=30)
    chosen = gym.make("mage/Household-v0", num_games=30, task_types=list(TASK_TYPES), max_expert_steps=99)
    assert [default.unwrapped._draw_instance() for _ in range(20)] == [chosen.unwrapped._draw_instance()
                                                                      for _ in range(20)]


@needs_textworld
def test_household_selection_keeps_train_and_eval_games_apart() -> None:
    options = {"num_games": 100, "looking_commands": False, "max_expert_steps": 3}
    draws = {split: gym.make("mage/Household-v0", instance_split=split, **options).unwrapped for split in ("train", "eval")}
    train, held = ({env._split_draw(env._draw_instance()) for _ in range(30)} for env in draws.values())  # as reset()
    key = gym.make("mage/Household-v0").unwrapped._split_key
    assert {split_half(key(k)) for k in train} == {"train"} and {split_half(key(k)) for k in held} == {"eval"}
    assert not {key(k) for k in train} & {key(k) for k in held}


@needs_textworld
@pytest.mark.parametrize("kwargs, message", [
    ({"task_types": ["pick_and_place"]}, "unknown task type 'pick_and_place'"),
    ({"task_types": "pick_and_place_simple"}, "non-empty list"),
    ({"max_expert_steps": 0}, "max_expert_steps must be an integer >= 1"),
    ({"max_expert_steps": 1, "num_games": 5}, "no game among the 5"),
])
def test_household_selection_refuses_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gym.make("mage/Household-v0", **kwargs)


@needs_textworld
@pytest.mark.parametrize("progress, rewards", [(0.0, [0.0, 0.0, 0.0, 0.0, 1.0]),
                                               (0.25, [0.0, 0.25, -0.25, 0.25, 1.25])])
def test_household_progress_reward_pays_each_shortening_of_the_experts_plan(progress: float, rewards: list) -> None:
    env = gym.make("mage/Household-v0", progress_reward=progress, max_steps=10)
    env.reset(options={"instance": 3})   # the expert: take remotecontrol 1 from shelf 1, put it on sofa 1
    commands = ["open drawer 1", "take remotecontrol 1 from shelf 1", "put remotecontrol 1 on armchair 1",
                "take remotecontrol 1 from armchair 1", "put remotecontrol 1 on sofa 1"]
    steps = play(env, [act(c) for c in commands])
    assert [step[1] for step in steps] == rewards and steps[-1][4]["success"]
    assert sum(rewards) == 1.0 + progress * 2   # the shaping sums to c x the plan's length at the start


@needs_textworld
def test_household_selection_of_alfworld_games_by_task_type_only() -> None:
    from pathlib import Path

    from mage_envs.tasks.household import HouseholdEnv

    data = Path(__file__).parent / "fixtures" / "household" / "alfworld"  # one clean-then-place game
    assert HouseholdEnv(alfworld_split="train", alfworld_data=data,
                        task_types=["pick_clean_then_place_in_recep"])._pool == [0]
    with pytest.raises(ValueError, match="no game among the 1"):
        HouseholdEnv(alfworld_split="train", alfworld_data=data, task_types=["pick_and_place_simple"])
    with pytest.raises(ValueError, match="max_expert_steps applies to generated games only"):
        HouseholdEnv(alfworld_split="train", alfworld_data=data, max_expert_steps=3)
