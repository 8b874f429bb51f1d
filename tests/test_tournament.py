"""The round robin: antisymmetric in a zero-sum game, CIs that cover the exact values, the CLI;
API models as entrants, against a real loopback chat endpoint (``api_helpers.chat_stub``)."""

import json
import math
import re
import socket
import threading
from collections import Counter

import pytest
from api_helpers import chat_stub

from mage_envs.agents import APIError, OpenAIChatAgent
from mage_envs.cli import main
from mage_envs.tournament import Entrant, archetype_entrant, round_robin, sampled_entrant

KUHN = ["nash", "aggressive", "conservative", "random"]


@pytest.fixture(scope="module")
def result():
    entrants = [archetype_entrant("kuhn_poker", n) for n in KUHN]
    return round_robin("kuhn_poker", [*entrants, Entrant("best-response", kind="best-response"),
                                      Entrant("bayes", kind="bayes")], games=40, seed=1)


def test_zero_sum_matrix_is_antisymmetric(result):
    for a in result.names:
        for b in result.names:
            if not math.isnan(result.payoff[a][b]):
                assert result.payoff[a][b] == pytest.approx(-result.payoff[b][a], abs=1e-12)
                assert result.ci95[a][b] == pytest.approx(result.ci95[b][a], abs=1e-12)
                assert result.exact[a][b] == pytest.approx(-result.exact[b][a], abs=1e-12)


def test_means_sit_in_their_confidence_intervals_around_the_exact_values(result):
    misses = [(a, b) for a in result.names for b in result.names if a < b and not math.isnan(result.payoff[a][b])
              and abs(result.payoff[a][b] - result.exact[a][b]) > result.ci95[a][b] + 1e-12]
    assert len(misses) <= 1, misses   # 13 pairs at 95%: one miss is chance, more is a bug


def test_hand_solved_values(result):
    assert result.exact["best-response"]["aggressive"] == pytest.approx(1 / 3)   # docs/oracles.md's table
    assert result.exact["nash"]["best-response"] == pytest.approx(0.0, abs=1e-12)   # the game value, seat averaged
    assert result.exact["bayes"]["random"] <= result.exact["best-response"]["random"] + 1e-12
    # a pure pair over stratified deals has no spread
    assert result.ci95["aggressive"]["conservative"] == 0.0
    assert result.ratings["best-response"]["mu"] > result.ratings["random"]["mu"]


def test_cli_writes_json_and_plot(tmp_path, capsys):
    assert main(["tournament", "--agents", "nash,aggressive,best-response", "--games", "5",
                 "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "tournament.json").read_text())
    assert data["names"] == ["nash", "aggressive", "best-response"]
    assert (tmp_path / "tournament.png").stat().st_size > 0
    assert "ratings" in capsys.readouterr().out
    assert main(["tournament", "--agents", "nash,nobody", "--output-dir", str(tmp_path)]) == 2


def test_bayes_best_responds_to_the_archetypes_in_its_prior_only():
    nash, aggressive = archetype_entrant("kuhn_poker", "nash"), archetype_entrant("kuhn_poker", "aggressive")
    outsider = Entrant("checkpoint", aggressive.table, in_prior=False)   # plays as aggressive, not in the prior
    result = round_robin("kuhn_poker", [nash, outsider, Entrant("bayes", kind="bayes")], games=2)
    # the prior is nash alone: bayes best-responds to nash, which earns the game value (0) against it
    assert result.exact["bayes"]["nash"] == pytest.approx(0.0, abs=1e-12)
    with_prior = round_robin("kuhn_poker", [nash, aggressive, Entrant("bayes", kind="bayes")], games=2)
    assert with_prior.exact["bayes"]["aggressive"] != pytest.approx(result.exact["bayes"]["checkpoint"])


# ---------------------------------------------------------------- API models as entrants
KUHN_META = "mage/KuhnPoker-meta-v0"
LEGAL = re.compile(r"^Legal actions: (.*)$", re.MULTILINE)


def _legal(body: dict) -> list[str]:
    return LEGAL.findall(body["messages"][-1]["content"])[-1].split(", ")


def bold(body: dict, headers: object) -> str:
    """Bets when it may, else calls: Kuhn's ``maniac``."""
    return "<action>bet</action>" if "bet" in _legal(body) else "<action>call</action>"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_api_model_is_tabulated_from_its_answers_to_the_full_first_hand_prompts():
    bodies = []
    lock = threading.Lock()

    def reply(body: dict, headers: object) -> str:
        with lock:
            bodies.append(body)
        return bold(body, headers)

    with chat_stub(reply) as url:
        agent = OpenAIChatAgent("m", url, temperature=0.7, concurrency=4, name="openai:m")
        entrant = sampled_entrant(KUHN_META, agent, samples=3)
    assert entrant.name == "openai:m" and not entrant.in_prior and entrant.kind == "table"
    assert entrant.table == archetype_entrant("kuhn_poker", "maniac").table   # exactly
    assert entrant.details["answers"] == 36 == len(bodies) and entrant.details["invalid"] == 0
    assert entrant.details["uniform_states"] == [] and entrant.details["settings"]["temperature"] == 0.7
    prompts = [b["messages"][-1]["content"] for b in bodies]
    assert all(b["temperature"] == 0.7 and "seed" not in b for b in bodies)   # no shared seed: samples may differ
    assert all("The deck has three cards" in p and "[Episode 1 of 3]" in p for p in prompts)   # mage eval's prompts
    assert set(Counter(prompts).values()) == {3} and len(set(prompts)) == 12   # every information state, 3 times


def test_sampled_frequencies_invalid_answers_and_states_without_a_valid_one():
    asked: Counter = Counter()
    lock = threading.Lock()

    def reply(body: dict, headers: object) -> str:
        prompt = body["messages"][-1]["content"]
        if "Your card: Jack." in prompt:
            return "I would rather not say."   # no valid answer at all at the Jack's states
        with lock:
            asked[prompt] += 1
            k = asked[prompt]
        if k == 4:
            return "<action>raise</action>"   # one invalid answer in four elsewhere
        first, second = _legal(body)
        return f"<action>{second if k == 1 else first}</action>"   # then 1 of the 3 valid ones: the second action

    with chat_stub(reply) as url:
        entrant = sampled_entrant(KUHN_META, OpenAIChatAgent("m", url, concurrency=8), samples=4, name="openai:m")
    jack = [key for key in entrant.table if key[0] == "0"]
    assert sorted(entrant.details["uniform_states"]) == sorted(jack) and len(jack) == 4
    for key, probs in entrant.table.items():
        assert probs == ({0: 0.5, 1: 0.5} if key in jack else {0: 2 / 3, 1: 1 / 3}), key
    assert entrant.details["invalid"] == 4 * 4 + 8 and entrant.details["answers"] == 48
    assert entrant.details["invalid_reasons"] == {"illegal_action": 8, "no_action_tag": 16}
    assert "4 information state(s) without a valid answer, played uniformly" in entrant.details["note"]


def test_an_api_entrant_plays_the_round_robin_as_its_table_would():
    with chat_stub(bold) as url:
        api = sampled_entrant(KUHN_META, OpenAIChatAgent("m", url, name="openai:m"), samples=2)
    others = [archetype_entrant("kuhn_poker", n) for n in ("nash", "aggressive", "maniac")]
    result = round_robin("kuhn_poker", [*others, api, Entrant("best-response", kind="best-response"),
                                        Entrant("bayes", kind="bayes")], games=10, seed=3)
    for column in ("nash", "aggressive", "best-response", "bayes"):
        for matrix in (result.payoff, result.ci95, result.exact):
            assert matrix["openai:m"][column] == matrix["maniac"][column], column   # the same games exactly
            assert matrix[column]["openai:m"] == matrix[column]["maniac"], column
    assert result.payoff["openai:m"]["maniac"] == 0.0 and result.exact["openai:m"]["maniac"] == 0.0
    for a in result.names:
        for b in result.names:
            if not math.isnan(result.payoff[a][b]):
                assert result.payoff[a][b] == pytest.approx(-result.payoff[b][a], abs=1e-12)
                assert result.exact[a][b] == pytest.approx(-result.exact[b][a], abs=1e-12)
    # bayes's prior is the archetypes only, as with a checkpoint
    assert result.exact["bayes"]["openai:m"] == result.exact["bayes"]["maniac"]
    assert result.entrants["openai:m"]["invalid"] == 0 and "openai:m: 24 answers" in result.table()
    assert json.loads(json.dumps(result.to_dict()))["entrants"]["openai:m"]["samples"] == 2


def test_cli_openai_entrant(tmp_path, capsys):
    with chat_stub(bold) as url:
        assert main(["tournament", "--agents", "nash,maniac,openai:org/model-1", "--base-url", url,
                     "--api-samples", "2", "--games", "3", "--output-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    data = json.loads((tmp_path / "tournament.json").read_text())
    assert data["names"] == ["nash", "maniac", "openai:org/model-1"]
    details = data["entrants"]["openai:org/model-1"]
    assert details["invalid"] == 0 and details["samples"] == 2 and details["base_url"] == url
    assert details["settings"]["model"] == "org/model-1" and details["settings"]["temperature"] == 1.0
    assert data["payoff"]["openai:org/model-1"]["nash"] == data["payoff"]["maniac"]["nash"]
    assert "openai:org/model-1: 24 answers (2 per information state), 0 invalid" in out
    assert "asking" in err and url in err
    saved = tmp_path / "policy_openai_org_model-1.json"
    assert details["table_file"] == str(saved)
    replay = archetype_entrant("kuhn_poker", f"table:{saved}")   # the sampled table, replayed without the API
    assert replay.table == archetype_entrant("kuhn_poker", "maniac").table


def test_cli_junk_answers_are_counted_and_flagged(tmp_path, capsys):
    with chat_stub(lambda body, headers: "hmm") as url:
        assert main(["tournament", "--agents", "nash,openai:m", "--base-url", url, "--api-samples", "3",
                     "--games", "2", "--output-dir", str(tmp_path)]) == 0
    details = json.loads((tmp_path / "tournament.json").read_text())["entrants"]["openai:m"]
    assert details["invalid"] == 36 == details["answers"] and len(details["uniform_states"]) == 12
    table = json.loads((tmp_path / "policy_openai_m.json").read_text())
    assert all(probs == {"0": 0.5, "1": 0.5} for probs in table.values())
    assert "12 information state(s) without a valid answer" in capsys.readouterr().out


def test_cli_a_dead_server_is_a_clear_error(tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    assert main(["tournament", "--agents", "nash,openai:m", "--base-url", url, "--retries", "0",
                 "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert re.search(r"error: openai:m could not be tabulated: POST http://127\.0\.0\.1:\d+/v1/chat/completions "
                     r"failed after 1 attempts: .*ConnectError", err), err
    assert "Traceback" not in err and "--resume" not in err and not (tmp_path / "tournament.json").exists()
    with pytest.raises(APIError):   # the library raises it for the caller
        sampled_entrant(KUHN_META, OpenAIChatAgent("m", url, retries=0), samples=1)


def test_cli_refuses_api_flags_without_an_api_entrant(tmp_path, capsys):
    assert main(["tournament", "--agents", "nash,aggressive", "--api-samples", "4",
                 "--output-dir", str(tmp_path)]) == 2
    assert "--api-samples apply to openai:MODEL entrants only" in capsys.readouterr().err
    assert main(["tournament", "--agents", "nash,openai:", "--output-dir", str(tmp_path)]) == 2
    assert "needs the model's name" in capsys.readouterr().err
