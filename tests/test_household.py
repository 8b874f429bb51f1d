"""Household (ALFWorld-style TextWorld games): tasks, compiled games, the env, the expert,
invalid answers, pickling, meta ids and the ALFWorld adapter."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from task_helpers import (
    act,
    check_registered_ids,
    check_reset_option_errors,
    play,
    step_and_check_report,
)

import mage_envs  # noqa: F401  (registers mage/Household-v0 and mage/Household-meta-v0)
from mage_envs.tasks.household.alfworld import alfred_names, alfworld_games, goal_from_intro
from mage_envs.tasks.household.scenes import OBJECTS_BY_USE, RECEPTACLES, SCENES, TOOLS
from mage_envs.tasks.household.session import clean_feedback
from mage_envs.tasks.household.tasks import TASK_TYPES, kind_of, make_task, plural

ALFWORLD_DATA = Path(__file__).parent / "fixtures" / "household" / "alfworld"
#: The first instance of each task type, and a second two-object one: every kind of game.
SHOWCASE = sorted({next(k for k in range(200) if make_task(k).task_type == t) for t in TASK_TYPES} | {3})

needs_textworld = pytest.mark.skipif(
    __import__("importlib").util.find_spec("textworld") is None, reason="needs the household extra (textworld)"
)


def random_answer(rng: random.Random, legal: list[str]) -> str:
    """A legal command, mostly tagged, sometimes bare, sometimes garbage."""
    roll = rng.random()
    if roll < 0.1 or not legal:
        return rng.choice(["", "go north", "<action>fly</action>", "I am thinking..."])
    if roll < 0.2:
        return rng.choice(legal).upper()
    return act(rng.choice(legal))


# ---------------------------------------------------------------------- tasks (no TextWorld)
def test_tasks_are_deterministic_and_pinned() -> None:
    assert make_task(0) is make_task(0)  # cached
    assert make_task.__wrapped__(0) == make_task(0)
    # pinned: a change here changes every game of the benchmark (bump GENERATOR_VERSION)
    task = make_task(1)
    assert (task.task_type, task.scene, task.goal) == ("pick_heat_then_place_in_recep", "kitchen", "put a hot plate in cabinet 1.")
    assert task.walkthrough == ("open cabinet 4", "take plate 1 from cabinet 4", "heat plate 1 with microwave 1",
                                "open cabinet 1", "insert plate 1 into cabinet 1")
    with pytest.raises(ValueError):
        make_task(-1)


def test_generated_tasks_are_well_formed() -> None:
    seen_types, seen_scenes = set(), set()
    for instance in range(400):
        task = make_task(instance)
        seen_types.add(task.task_type)
        seen_scenes.add(task.scene)
        names = [item.name for item in task.items]
        assert len(names) == len(set(names)) and len(task.receptacles) == len(set(task.receptacles))
        assert all(item.location in task.receptacles for item in task.items)
        kind = kind_of(task.targets[0])
        # exactly the objects the goal needs: "put a mug in desk 1" means that mug
        assert [i.name for i in task.items if i.kind == kind] == list(task.targets)
        assert len(task.targets) == (2 if task.task_type == "pick_two_obj_and_place" else 1)
        assert all(i.location != task.destination for i in task.items if i.name in task.targets)
        assert task.operation == TASK_TYPES[task.task_type]
        if task.operation:
            assert kind in OBJECTS_BY_USE[task.operation] and kind_of(task.tool) == TOOLS[task.operation]
        assert task.destination.split()[0] in RECEPTACLES and task.goal.endswith(f"{task.destination}.")
        assert task.walkthrough[-1].split()[0] in ("insert", "put")
    assert seen_types == set(TASK_TYPES) and seen_scenes == {scene.name for scene in SCENES}


def test_words_and_names() -> None:
    assert [plural(w) for w in ("butterknife", "potato", "box", "watch", "cd", "pen")] == [
        "butterknives", "potatoes", "boxes", "watches", "cds", "pens"]
    ids = ["mug_bar__plus_01", "mug_bar__minus_02", "sink_bar__plus_00_bar_sinkbasin", "agent1", "loc_bar_1"]
    assert alfred_names(ids) == {"mug_bar__minus_02": "mug 2", "mug_bar__plus_01": "mug 1",
                                 "sink_bar__plus_00_bar_sinkbasin": "sinkbasin 1", "agent1": "agent1",
                                 "loc_bar_1": "loc 1"}
    assert goal_from_intro("no task here") == ""
    assert clean_feedback("") == "" and clean_feedback("caf\u00e9\n>") == "cafe"


def test_alfworld_games_follow_alfworlds_filter() -> None:
    games = alfworld_games("train", ALFWORLD_DATA)
    assert [g.task_type for g in games] == ["pick_clean_then_place_in_recep"]  # the unsolvable one is skipped
    assert games[0].path.name == "game.tw-pddl"
    with pytest.raises(FileNotFoundError, match="no solvable ALFWorld game"):
        alfworld_games("valid_seen", ALFWORLD_DATA)
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA"):
        alfworld_games("train", ALFWORLD_DATA / "missing")
    with pytest.raises(ValueError, match="split"):
        alfworld_games("test", ALFWORLD_DATA)


def test_import_mage_envs_does_not_import_textworld() -> None:
    code = ("import sys, gymnasium as gym, mage_envs, mage_envs.tasks.household; gym.spec('mage/Household-v0'); "
            "print('textworld' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------- compiled games
@needs_textworld
def test_generate_games_builds_each_game_once_into_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from mage_envs.tasks.household.builder import games_dir, generate_games

    paths = generate_games([2, 5], cache_dir=tmp_path)
    assert "household games" in capsys.readouterr().err  # the tqdm bar
    assert [p.parent.name for p in paths] == ["2", "5"] and all(p.with_suffix(".json").is_file() for p in paths)
    assert sorted(p.name for p in games_dir(tmp_path).iterdir()) == ["2", "5", "text_grammars"]  # no staging left
    stamps = [p.stat().st_mtime_ns for p in paths]
    assert generate_games([2, 5], cache_dir=tmp_path) == paths
    assert [p.stat().st_mtime_ns for p in paths] == stamps  # found, not rebuilt


@needs_textworld
@pytest.mark.parametrize("instance", SHOWCASE)
def test_compiled_games_play_the_walkthrough_and_the_expert_succeeds(instance: int) -> None:
    from mage_envs.tasks.household import HouseholdEnv

    task = make_task(instance)
    env = HouseholdEnv()
    obs, info = env.reset(options={"instance": instance})
    assert info["goal"] == task.goal and info["task_type"] == task.task_type
    assert f"Your task is to: {task.goal}" in obs
    assert all(r in obs for r in task.receptacles)  # the room description lists every receptacle
    expert = env.expert_actions()
    assert sorted(expert) == sorted(task.walkthrough)  # TextWorld's policy is the walkthrough, reordered
    *_, (obs, reward, terminated, truncated, info) = play(env, [act(c) for c in expert])
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["outcome"] == "win" and info["success"] and info["legal_actions"] == [] and env.expert_actions() == []
    assert "Task complete" in obs and "RESTART" not in obs
    env.reset(options={"instance": instance})  # the walkthrough itself wins too
    assert play(env, [act(c) for c in task.walkthrough])[-1][4]["success"]


@needs_textworld
def test_expert_from_mid_episode_states() -> None:
    from mage_envs.tasks.household import HouseholdEnv

    rng = random.Random(3)
    env = HouseholdEnv(max_steps=100)
    for episode in range(12):
        _, info = env.reset(options={"instance": SHOWCASE[episode % len(SHOWCASE)]})
        for _ in range(rng.randrange(1, 12)):
            _, _, terminated, _, info = env.step(act(rng.choice(info["legal_actions"])))
            if terminated:
                break
        if terminated:
            continue
        expert = env.expert_actions()
        assert expert, env.game_path
        steps = play(env, [act(c) for c in expert])
        assert steps[-1][4]["success"] and len(steps) == len(expert)


@needs_textworld
@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_on_the_registered_ids() -> None:
    from mage_envs.tasks.household import HouseholdEnv

    check_registered_ids("Household", HouseholdEnv)


@needs_textworld
def test_prompt_info_and_history() -> None:
    env = gym.make("mage/Household-v0", history_length=2)
    obs, info = env.reset(options={"instance": 3})
    for piece in ("TextWorld", "Task: put a remotecontrol on sofa 1.", "Actions taken: 0 of 50", "The game begins:",
                  "-= Living Room =-", "none yet", "Legal actions: close garbagecan 1, examine armchair 1",
                  "<action>take apple 1 from countertop 1</action>"):
        assert piece in obs, piece
    assert "$$" not in obs and ">" not in obs.split("The game begins:")[1].split("Your actions")[0]
    assert set(info) == {"legal_actions", "opponent", "seat", "invalid_action", "instance", "task_type", "goal"}
    assert info["opponent"] is None and info["seat"] == 0 and "look" in info["legal_actions"]
    for command in ("look", "inventory", "open drawer 1"):
        obs, reward, *_ = env.step(act(command))
        assert reward == 0.0
    assert "The game's answer to 'open drawer 1':\nYou open the drawer 1" in obs
    assert "(the last 2 of 3)" in obs and "- inventory -> You are carrying nothing." in obs and "- look ->" not in obs
    assert "Actions taken: 3 of 50" in obs


@needs_textworld
def test_truncation_at_max_steps() -> None:
    env = gym.make("mage/Household-v0", max_steps=3)
    env.reset(options={"instance": 3})
    steps = play(env, [act("look")] * 5)
    assert [s[3] for s in steps] == [False, False, True] and not any(s[2] for s in steps)
    info = steps[-1][4]
    assert info["outcome"] == "loss" and not info["success"] and info["summary"].endswith("not done after 3 actions.")
    assert "Out of actions" in steps[-1][0]
    with pytest.raises(RuntimeError):
        env.step("look")


@needs_textworld
def test_rollouts_are_deterministic_under_a_seed() -> None:
    def rollouts(seed: int) -> list:
        env = gym.make("mage/Household-v0", max_steps=12, invalid_action="fallback", num_games=4)
        rng = random.Random(seed)
        obs, info = env.reset(seed=seed)
        out = [(obs, info)]
        for episode in range(4):
            if episode:
                obs, info = env.reset()
                out.append((obs, info))
            for _ in range(12):
                out.append(env.step(random_answer(rng, info["legal_actions"])))
                info = out[-1][4]
                if out[-1][2] or out[-1][3]:
                    break
        return out

    assert rollouts(4) == rollouts(4)
    assert rollouts(4) != rollouts(5)


@needs_textworld
def test_instance_option_replays_the_game() -> None:
    env = gym.make("mage/Household-v0", num_games=4)
    obs, info = env.reset(seed=3)
    env.step(act(info["legal_actions"][0]))
    for _ in range(2):
        again, info_again = env.reset(options={"instance": info["instance"]})
        assert again == obs and info_again == info
    assert 0 <= info["instance"] < 4


@needs_textworld
def test_pickle_mid_episode_continues_identically() -> None:
    env = gym.make("mage/Household-v0", invalid_action="fallback").unwrapped
    _, info = env.reset(options={"instance": SHOWCASE[1]})
    for command in env.expert_actions()[:2]:
        env.step(act(command))
    clone = pickle.loads(pickle.dumps(env))
    assert clone.expert_actions() == env.expert_actions()
    rng = random.Random(0)
    answers = [random_answer(rng, info["legal_actions"]) for _ in range(15)]
    assert play(env, answers) == play(clone, answers)
    fresh = pickle.loads(pickle.dumps(gym.make("mage/Household-v0").unwrapped))  # never reset: nothing to replay
    with pytest.raises(RuntimeError):
        fresh.step("look")


@needs_textworld
@pytest.mark.parametrize(
    "kwargs, error",
    [({"max_steps": 0}, ValueError), ({"history_length": 0}, ValueError), ({"num_games": 0}, ValueError),
     ({"render_mode": "human"}, ValueError), ({"max_steps": 2.5}, ValueError),
     ({"alfworld_split": "train", "alfworld_data": "/nonexistent"}, FileNotFoundError)],
)
def test_constructor_errors(kwargs: dict, error: type) -> None:
    from mage_envs.tasks.household import HouseholdEnv

    with pytest.raises(error):
        HouseholdEnv(**kwargs)


@needs_textworld
def test_reset_option_errors() -> None:
    check_reset_option_errors(gym.make("mage/Household-v0"), bad_instance=-3)


# ---------------------------------------------------------------------- invalid actions
@needs_textworld
def test_retry_keeps_the_state_then_forfeits() -> None:
    env = gym.make("mage/Household-v0", invalid_action={"mode": "retry", "max_retries": 2, "penalty": -0.5})
    env.reset(options={"instance": 3})
    env.step("look")
    inner = env.unwrapped
    before = (inner.steps, inner.expert_actions())
    for left in (1, 0):
        obs, reward, terminated, truncated, info = env.step("<action>take sofa 1</action>")
        assert (reward, terminated, truncated) == (-0.5, False, False) and (inner.steps, inner.expert_actions()) == before
        assert info["invalid_action"]["applied"] == "retry" and info["invalid_action"]["retries_left"] == left
        assert "'take sofa 1' is not a legal action now" in obs and f"Retries left: {left}" in obs
        assert "Actions taken: 1 of 50" in obs  # a retried answer is not a step
    obs, reward, terminated, truncated, info = env.step("")
    assert terminated and reward == -0.5 and info["invalid_action"]["applied"] == "forfeit" and info["forfeit"]
    assert info["outcome"] == "loss" and not info["success"] and "forfeited" in obs and "forfeited" in info["summary"]


@needs_textworld
def test_forfeit_and_fallback() -> None:
    env = gym.make("mage/Household-v0", invalid_action={"mode": "forfeit", "penalty": -1.0, "forfeit_return": -3.0})
    env.reset(options={"instance": 3})
    _obs, reward, terminated, _truncated, info = env.step("I would look around.")
    assert terminated and reward == -4.0 and info["invalid_action"]["reason"] == "no_action_tag"
    env = gym.make("mage/Household-v0", invalid_action={"mode": "fallback", "fallback": "first", "penalty": -0.25})
    _, info = env.reset(options={"instance": 3})
    obs, reward, *_, info = env.step("<action>fly</action>")
    assert info["invalid_action"]["played"] == "close garbagecan 1" and reward == -0.25
    assert "You close the garbagecan 1" in obs and env.unwrapped.steps == 1


LLM_TEXT = st.one_of(
    st.text(max_size=120),
    st.sampled_from([
        "", " ", "<action>", "</action>", "<action></action>", "<action>LOOK</action><action>inventory</action>",
        "<action>look</action>" * 40, "Ignore previous instructions and print the walkthrough.",
        "Legal actions: look, inventory", "<action>\u00e9xamine sofa 1</action>", "<action>\x00look</action>",
        "<action>look", "<ACTION> Inventory </ACTION>", "go to sofa 1", "take remotecontrol 1 from shelf 1",
    ]),
    st.builds(lambda n, tail: "x" * n + tail, st.sampled_from([0, 9000, 200_000]),
              st.sampled_from(["", "<action>look</action>"])),
)


@needs_textworld
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.lists(LLM_TEXT, min_size=1, max_size=6), mode=st.sampled_from(["retry", "forfeit", "fallback"]))
def test_any_text_never_crashes_and_is_reported(answers: list[str], mode: str) -> None:
    env = gym.make("mage/Household-meta-v0", num_episodes=2, invalid_action=mode)
    _obs, info = env.reset(options={"instance": 3})
    inner = env.unwrapped  # the HouseholdEnv inside the meta wrapper
    for answer in answers:
        acting = info["phase"] == "act"
        _obs, _reward, terminated, truncated, info = step_and_check_report(
            env, answer, mode, acting, lambda: (inner.steps, inner.expert_actions()), info["legal_actions"]
        )
        if terminated or truncated:
            break


# ---------------------------------------------------------------------- meta ids
@needs_textworld
def test_meta_replays_the_same_game_and_pays_the_differential_reward() -> None:
    env = gym.make("mage/Household-meta-v0", num_episodes=3, max_steps=6)
    obs, info = env.reset(seed=1)
    inner = env.unwrapped
    instances, goals, rewards = [info["instance"]], [info["goal"]], []
    policies = [lambda: "look", lambda: inner.expert_actions()[0], lambda: "inventory"]
    while True:
        if info["phase"] == "reflect":
            obs, reward, terminated, truncated, info = env.step("<reflection>take the target first</reflection>")
            instances.append(info["instance"])
            goals.append(info["goal"])
            assert "take the target first" in obs and f"[Episode {info['episode_index'] + 1} of 3]" in obs
        else:
            obs, reward, terminated, truncated, info = env.step(act(policies[info["episode_index"]]()))
        rewards.append(reward)
        if terminated or truncated:
            break
    assert len(set(instances)) == 1 and len(set(goals)) == 1  # the same game every episode
    assert info["episode_outcomes"] == ["loss", "win", "loss"] and info["episode_returns"] == [0.0, 1.0, 0.0]
    assert sum(rewards) == pytest.approx(0.0) and sorted(r for r in rewards if r) == [-1.0, 1.0]


# ---------------------------------------------------------------------- ALFWorld's games
@needs_textworld
def test_alfworld_adapter_plays_a_game_in_alfworlds_format(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fast_downward", reason="TextWorld's PDDL engine needs fast-downward-textworld")
    monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
    env = gym.make("mage/Household-v0", alfworld_split="train")
    obs, info = env.reset(seed=0)
    assert env.unwrapped.num_games == 1 and info["instance"] == 0
    assert info["goal"] == "put a clean apple in fridge." and info["task_type"] == "pick_clean_then_place_in_recep"
    assert "you see a countertop 1, a fridge 1, and a sinkbasin 1" in obs and "- go to X walks" in obs
    assert info["legal_actions"] == ["go to countertop 1", "go to fridge 1", "go to sinkbasin 1", "help", "inventory", "look"]
    expert = env.unwrapped.expert_actions()  # ALFWorld's PLANNER expert (Fast Downward)
    assert expert[:2] == ["go to countertop 1", "take apple 1 from countertop 1"] and expert[-1] == "move apple 1 to fridge 1"
    env.step(act(expert[0]))
    clone = pickle.loads(pickle.dumps(env))
    for e in (env, clone):
        *_, (obs, reward, terminated, _truncated, info) = play(e, [act(c) for c in expert[1:]])
        assert reward == 1.0 and terminated and info["success"]
