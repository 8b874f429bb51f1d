"""`evaluate(transcript=...)`: finished meta-episodes are appended as they end and a rerun
resumes from them, ending with exactly the report of an uninterrupted run."""

import json
import zlib

import pytest

from mage_envs.evaluation import evaluate
from mage_envs.oracle.agents import BestResponseAgent

ENV = "mage/KuhnPoker-meta-v0"
OPPONENTS = ["aggressive", "conservative"]


class PromptHashAgent:
    """A legal action chosen by a hash of the prompt: the answers depend on the prompts only."""

    name = "prompt-hash"

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after
        self.last_usage: list = []

    def answer(self, observation, info):
        if info.get("phase") == "reflect":
            return "<reflection>none</reflection>"
        legal = info["legal_actions"]
        return f"<action>{legal[zlib.crc32(observation.encode()) % len(legal)]}</action>"

    def act_batch(self, observations, infos):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("killed")
        self.last_usage = [{"prompt_tokens": len(o), "completion_tokens": 1} for o in observations]
        return [self.answer(o, i) for o, i in zip(observations, infos)]


def run(agent, path=None, meta_episodes=12, **kwargs):
    kwargs.setdefault("env_kwargs", {"reflection": True})
    return evaluate(agent, ENV, opponents=OPPONENTS, meta_episodes=meta_episodes, seed=7, progress=False,
                    transcript=path, **kwargs).to_dict()


@pytest.mark.parametrize("batch_size,repeat", [(4, True), (256, True), (4, False)])
def test_a_killed_evaluation_resumes_to_the_uninterrupted_report(tmp_path, batch_size, repeat):
    env_kwargs = {"reflection": True, "repeat_instance": repeat}
    straight = run(PromptHashAgent(), batch_size=batch_size, env_kwargs=env_kwargs)
    # fresh deals: the ceilings on each hand's deals come back with the records
    assert all((r["best_response_by_episode"] is None) == repeat for r in straight["opponents"].values())
    path = tmp_path / "transcript.jsonl"
    with pytest.raises(RuntimeError, match="killed"):
        run(PromptHashAgent(fail_after=12), path, batch_size=batch_size, env_kwargs=env_kwargs)
    done = [json.loads(line) for line in path.read_text().splitlines()]
    assert 0 < len(done) < 2 * 12
    resumed_agent = PromptHashAgent()
    assert run(resumed_agent, path, batch_size=batch_size, env_kwargs=env_kwargs) == straight
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((r["opponent"], r["index"]) for r in records) == sorted((o, j) for o in OPPONENTS for j in range(12))
    # a third run replays nothing
    again = PromptHashAgent(fail_after=0)
    assert run(again, path, batch_size=batch_size, env_kwargs=env_kwargs) == straight and again.calls == 0


def test_a_record_holds_every_step_and_the_token_usage(tmp_path):
    path = tmp_path / "transcript.jsonl"
    run(PromptHashAgent(), path, meta_episodes=2)
    record = json.loads(path.read_text().splitlines()[0])
    assert record["settings"]["env_id"] == ENV and record["settings"]["agent"] == "prompt-hash"
    assert (record["opponent"], record["index"], record["seed"]) == ("aggressive", record["index"], 7 + record["index"])
    assert len(record["returns"]) == len(record["outcomes"]) == 3
    phases = [step["phase"] for step in record["steps"]]
    assert phases.count("reflect") == 2 and phases[-1] == "act"
    first = record["steps"][0]
    assert "\n\n[Episode 1 of 3]\nYou are Player" in first["prompt"] and first["answer"].startswith("<action>")
    assert record["usage"]["completion_tokens"] == len(record["steps"])
    assert record["act_steps"] == phases.count("act")


def test_a_factory_agent_resumes_too(tmp_path):
    straight = run(None, make_agent=BestResponseAgent, env_kwargs={})
    path = tmp_path / "transcript.jsonl"
    run(None, path, meta_episodes=5, make_agent=BestResponseAgent, env_kwargs={})
    assert run(None, path, make_agent=BestResponseAgent, env_kwargs={}) == straight  # 5 read back, 7 played


def test_other_settings_are_refused(tmp_path):
    path = tmp_path / "transcript.jsonl"
    run(PromptHashAgent(), path, meta_episodes=2)
    with pytest.raises(ValueError, match="other settings.*env_kwargs"):
        run(PromptHashAgent(), path, meta_episodes=2, env_kwargs={"reflection": False})
    with pytest.raises(ValueError, match="other settings.*seed"):
        evaluate(PromptHashAgent(), ENV, opponents=OPPONENTS, meta_episodes=2, seed=8, progress=False,
                 env_kwargs={"reflection": True}, transcript=path)
    with pytest.raises(ValueError, match="other settings.*stratified"):
        run(PromptHashAgent(), path, meta_episodes=2, stratify=False)


def test_a_line_cut_short_by_a_kill_is_dropped(tmp_path):
    straight = run(PromptHashAgent(), meta_episodes=3)
    path = tmp_path / "transcript.jsonl"
    run(PromptHashAgent(), path, meta_episodes=3)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    assert run(PromptHashAgent(), path, meta_episodes=3) == straight
    assert [json.loads(line)["index"] for line in path.read_text().splitlines()][-1] == json.loads(lines[-1])["index"]


def test_a_damaged_line_inside_the_file_is_an_error(tmp_path):
    path = tmp_path / "transcript.jsonl"
    run(PromptHashAgent(), path, meta_episodes=2)
    path.write_text("not json\n" + path.read_text())
    with pytest.raises(ValueError, match="transcript.jsonl:1 is not a transcript record"):
        run(PromptHashAgent(), path, meta_episodes=2)


def test_more_meta_episodes_extend_a_transcript(tmp_path):
    path = tmp_path / "transcript.jsonl"
    run(PromptHashAgent(), path, meta_episodes=12)
    agent = PromptHashAgent()
    assert run(agent, path, meta_episodes=24) == run(PromptHashAgent(), meta_episodes=24)
    assert len(path.read_text().splitlines()) == 2 * 24


def test_an_invalid_answer_that_ends_an_episode_is_counted(tmp_path):
    class Mute:
        def __call__(self, observation, info):
            return "no tag"

    path = tmp_path / "transcript.jsonl"
    report = evaluate(Mute(), ENV, opponents=["aggressive"], meta_episodes=2, seed=0, progress=False, transcript=path)
    assert report.opponents["aggressive"].invalid_action_rate == 1.0  # forfeits in episodes 1 and 2 included
    steps = json.loads(path.read_text().splitlines()[0])["steps"]
    applied = [s["invalid_action"]["applied"] for s in steps if s["phase"] == "act"]
    assert applied == ["retry", "retry", "forfeit"] * 3


def test_a_bounded_transcript_keeps_the_first_meta_episodes_steps_and_every_result(tmp_path):
    full, bounded = tmp_path / "full.jsonl", tmp_path / "bounded.jsonl"
    straight = run(PromptHashAgent(), full)
    assert run(PromptHashAgent(), bounded, transcript_steps=3) == straight
    kept = {(r["opponent"], r["index"]): r for r in map(json.loads, full.read_text().splitlines())}
    for record in map(json.loads, bounded.read_text().splitlines()):
        whole = kept[record["opponent"], record["index"]]
        assert record["steps"] == (whole["steps"] if record["index"] < 3 else [])
        assert record.get("final_observation") == (whole["final_observation"] if record["index"] < 3 else None)
        replay = ("steps", "final_observation")
        assert {k: v for k, v in record.items() if k not in replay} == {k: v for k, v in whole.items() if k not in replay}
    assert record["usage"]["completion_tokens"] == record["act_steps"] + 2   # two reflections: usage still summed
    assert bounded.stat().st_size < full.stat().st_size / 3
    assert run(PromptHashAgent(fail_after=0), bounded, transcript_steps=3) == straight   # resumed: nothing replayed
