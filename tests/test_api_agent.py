"""`OpenAIChatAgent` and `mage eval --agent openai` against a real server on loopback.

The server is transformers' own OpenAI-compatible one (`transformers serve`) serving the
embedded SmolLM2-135M-Instruct. Faults come from a small real HTTP proxy in front of it
(500, 429, a malformed body, a closed connection, an answer slower than the timeout) and
from a port with nothing listening; each must be retried or reported clearly, and the
finished meta-episodes of an interrupted evaluation must survive and resume.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from api_helpers import chat_stub

from mage_envs.agents import APIError, OpenAIChatAgent
from mage_envs.agents.openai_chat import _retry_after
from mage_envs.cli import main
from mage_envs.evaluation import evaluate

REFLECT = {"phase": "reflect"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def served_model(tmp_path_factory):
    """``(base_url, model name)`` of a `transformers serve` subprocess serving SmolLM2-135M."""
    if shutil.which("transformers") is None:
        pytest.skip("the `transformers` command is not installed")
    try:
        from transformers.utils.import_utils import is_serve_available

        from mage_agent.pretrained import resolve_model_path
    except ImportError as error:
        pytest.skip(f"transformers serve needs the [agent] extra ({error})")
    if not is_serve_available():
        pytest.skip("`transformers serve` needs fastapi, uvicorn, pydantic and openai (pip install 'transformers[serving]')")
    model = str(resolve_model_path("smollm2-135m"))
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            ["transformers", "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", model],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"transformers serve did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", model
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


class FaultProxy:
    """A loopback HTTP proxy to ``upstream`` answering with ``fault()``'s fault when it names one.

    Faults: ``"500"``, ``"429"`` (with ``Retry-After: 0``), ``"malformed"`` (HTML, status
    200), ``"no-choices"`` (JSON without an answer), ``"close"`` (the connection is closed
    unanswered), ``"slow"`` (forwarded after ``delay`` seconds).
    """

    def __init__(self, upstream: str, fault: Callable[[int], str | None], delay: float = 0.0) -> None:
        self.upstream = upstream.split("//")[1].split("/")[0]
        self.fault = fault
        self.delay = delay
        self.requests = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with proxy.lock:
                    proxy.requests += 1
                    fault = proxy.fault(proxy.requests)
                if fault == "close":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault in ("500", "429", "malformed", "no-choices"):
                    status = {"500": 500, "429": 429}.get(fault, 200)
                    text = {"malformed": b"<html>oops</html>", "no-choices": b'{"choices": []}'}.get(fault, b"boom")
                    self.send_response(status)
                    if fault == "429":
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return
                if fault == "slow":
                    time.sleep(proxy.delay)
                connection = http.client.HTTPConnection(proxy.upstream, timeout=600)
                connection.request("POST", self.path, body, {"Content-Type": "application/json"})
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy_to(served_model):
    proxies = []

    def make(fault: Callable[[int], str | None], delay: float = 0.0) -> FaultProxy:
        proxies.append(FaultProxy(served_model[0], fault, delay))
        return proxies[-1]

    yield make
    for proxy in proxies:
        proxy.close()


def test_the_real_server_answers_a_batch_with_its_token_usage(served_model):
    url, model = served_model
    agent = OpenAIChatAgent(model, url, max_tokens=4, concurrency=2)
    answers = agent.act_batch(["Say hi.", "Say yes.", "Name a card."], [REFLECT] * 3)
    assert len(answers) == 3 and all(isinstance(a, str) and a for a in answers)
    assert all(u is not None and 0 < u["completion_tokens"] <= 4 and u["prompt_tokens"] > 0 for u in agent.last_usage)


@pytest.mark.parametrize("fault", ["500", "429", "malformed", "no-choices", "close"])
def test_a_failed_request_is_retried_until_it_succeeds(proxy_to, served_model, fault):
    proxy = proxy_to(lambda n: fault if n <= 2 else None)
    agent = OpenAIChatAgent(served_model[1], proxy.url, max_tokens=2, retries=2, backoff=0.01)
    assert isinstance(agent("Say hi.", REFLECT), str)
    assert proxy.requests == 3


def test_an_answer_slower_than_the_timeout_is_retried(proxy_to, served_model):
    proxy = proxy_to(lambda n: "slow" if n == 1 else None, delay=11.0)
    agent = OpenAIChatAgent(served_model[1], proxy.url, max_tokens=2, retries=1, backoff=0.01, timeout=10.0)
    assert isinstance(agent("Say hi.", REFLECT), str)
    assert proxy.requests == 2


def test_failures_beyond_the_retries_are_a_clear_error(proxy_to, served_model):
    proxy = proxy_to(lambda n: "500")
    agent = OpenAIChatAgent(served_model[1], proxy.url, retries=2, backoff=0.01)
    with pytest.raises(APIError, match=r"POST http://127\.0\.0\.1:\d+/v1/chat/completions failed after 3 attempts: "
                                       r"HTTP 500: 'boom'") as error:
        agent("Say hi.", REFLECT)
    assert error.value.status == 500 and proxy.requests == 3
    proxy = proxy_to(lambda n: "malformed")
    with pytest.raises(APIError, match="malformed body .*<html>oops</html>"):
        OpenAIChatAgent(served_model[1], proxy.url, retries=1, backoff=0.01)("Say hi.", REFLECT)


def test_a_server_that_is_down_is_a_clear_error():
    agent = OpenAIChatAgent("m", f"http://127.0.0.1:{_free_port()}/v1", retries=2, backoff=0.01)
    with pytest.raises(APIError, match=r"failed after 3 attempts: .*ConnectError"):
        agent.act_batch(["a", "b"], [REFLECT, REFLECT])


def test_a_refused_request_is_not_retried(served_model):
    agent = OpenAIChatAgent("no-such-model", served_model[0], retries=3, backoff=10.0)
    started = time.monotonic()
    with pytest.raises(APIError, match=r"answered HTTP 4\d\d: .*no-such-model") as error:
        agent("Say hi.", REFLECT)
    assert 400 <= error.value.status < 500 and time.monotonic() - started < 10  # no backoff


def test_retry_after_is_read_as_seconds_or_a_date():
    assert _retry_after("3") == 3.0 and _retry_after(None) is None and _retry_after("soon") is None
    assert 0 <= _retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 60))) <= 61
    agent = OpenAIChatAgent("m", backoff=0.01, max_backoff=5.0)
    assert agent._delay(0, 2.0) == 2.0 and agent._delay(0, 100.0) == 5.0 and agent._delay(0, None) <= 0.01


def test_an_interrupted_evaluation_keeps_what_was_played_and_resumes(proxy_to, served_model, tmp_path):
    transcript = tmp_path / "transcript.jsonl"
    # healthy until the first meta-episode is recorded, then a server error on every request
    proxy = proxy_to(lambda n: "500" if transcript.exists() and transcript.read_text() else None)
    settings = dict(env_id="mage/KuhnPoker-meta-v0", opponents=["aggressive"], meta_episodes=2, seed=3,
                    env_kwargs={"num_episodes": 1}, progress=False, batch_size=1, transcript=transcript)
    agent = OpenAIChatAgent(served_model[1], proxy.url, max_tokens=8, retries=1, backoff=0.01)
    with pytest.raises(APIError, match="HTTP 500"):
        evaluate(agent, **settings)
    first = transcript.read_text()
    assert len(first.splitlines()) == 1
    record = json.loads(first)
    assert record["index"] == 0 and record["steps"][0]["usage"]["completion_tokens"] > 0
    assert all(step["answer"] is not None for step in record["steps"])

    healthy = proxy_to(lambda n: None)
    agent = OpenAIChatAgent(served_model[1], healthy.url, max_tokens=8, retries=1, backoff=0.01)
    report = evaluate(agent, **settings)
    assert report.opponents["aggressive"].meta_episodes == 2
    lines = transcript.read_text().splitlines()
    assert lines[0] == first.strip() and [json.loads(line)["index"] for line in lines] == [0, 1]
    assert healthy.requests == len(json.loads(lines[1])["steps"])  # meta-episode 0 was not replayed
    other = OpenAIChatAgent(served_model[1], healthy.url, max_tokens=16)
    with pytest.raises(ValueError, match="other settings.*agent_settings"):  # another budget: not mixed in
        evaluate(other, **settings)


def test_mage_eval_agent_openai(served_model, tmp_path, capsys):
    url, model = served_model
    flags = ["eval", "--agent", "openai", "--base-url", url, "--model", model, "--opponents", "aggressive",
             "--meta-episodes", "1", "--env-kwarg", "num_episodes=1", "--max-tokens", "8", "--output-dir",
             str(tmp_path), "--quiet", "--retries", "1"]
    assert main(flags) == 0
    report = json.loads((tmp_path / "eval_openai.json").read_text())
    assert report["agent"] == "openai" and report["opponents"]["aggressive"]["best_response_value"] is not None
    record = json.loads((tmp_path / "transcript_openai.jsonl").read_text())
    assert record["usage"]["completion_tokens"] > 0 and "api_key" not in json.dumps(record).lower()
    capsys.readouterr()
    assert main(flags) == 2  # an earlier transcript is continued only when asked
    assert "--resume" in capsys.readouterr().err
    down = [f if f != url else f"http://127.0.0.1:{_free_port()}/v1" for f in flags]
    assert main(down + ["--overwrite"]) == 1
    assert "ConnectError" in capsys.readouterr().err and not (tmp_path / "transcript_openai.jsonl").exists()


def test_mage_eval_refuses_an_api_agent_without_a_model(capsys):
    assert main(["eval", "--agent", "openai", "--quiet"]) == 2
    assert "needs --model" in capsys.readouterr().err
    assert main(["eval", "--agent", "random", "--prompting", "react"]) == 2
    assert "--prompting applies to --agent openai only" in capsys.readouterr().err


def test_the_key_is_sent_from_the_environment_and_not_kept(monkeypatch):
    seen = []

    def reply(body: dict, headers: http.client.HTTPMessage) -> str:
        seen.append(headers.get("Authorization"))
        return "<action>bet</action>"

    with chat_stub(reply) as url:
        monkeypatch.setenv("MAGE_TEST_KEY", "sk-secret")
        agent = OpenAIChatAgent("m", url, api_key_env="MAGE_TEST_KEY")
        assert agent("x", REFLECT) == "<action>bet</action>" and agent.last_usage == [None]
        assert seen == ["Bearer sk-secret"] and "sk-secret" not in json.dumps(vars(agent), default=repr)
        monkeypatch.delenv("MAGE_TEST_KEY")
        agent("x", REFLECT)
        assert seen[-1] is None


def test_many_prompts_respect_the_concurrency_limit():
    active, peak = [0], [0]
    lock = threading.Lock()

    def reply(body: dict, headers: http.client.HTTPMessage) -> str:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return body["messages"][-1]["content"].upper()

    with chat_stub(reply) as url:
        agent = OpenAIChatAgent("m", url, concurrency=3)
        prompts = [f"p{i}" for i in range(12)]
        assert agent.act_batch(prompts, [REFLECT] * 12) == [p.upper() for p in prompts]  # order kept
        assert 1 < peak[0] <= 3


def test_reflexion_prompting_adds_its_instructions_to_acting_prompts_only():
    agent = OpenAIChatAgent("m", prompting="reflexion")
    assert agent.name == "openai-reflexion"
    from mage_envs.agents.prompting import REFLEXION_INSTRUCTIONS, with_instructions

    assert with_instructions("obs", {"phase": "act"}, "reflexion") == "obs" + REFLEXION_INSTRUCTIONS
    assert agent.messages("p") == [{"role": "user", "content": "p"}]
    with pytest.raises(ValueError, match="unknown prompting"):
        OpenAIChatAgent("m", prompting="cot")


def test_one_eval_help_shows_every_flag_once(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = capsys.readouterr().out
    for flag in ("--agent", "--model MODEL, --checkpoint MODEL", "--base-url", "--api-key-env", "--concurrency",
                 "--eval-meta-episodes", "--output-dir", "--prompting", "--resume", "--retries", "--timeout"):
        assert text.count(flag + " ") + text.count(flag + "\n") >= 1, flag
    assert "random,best-response,bayes,policy,react,reflexion,openai" in text and text.count("--output-dir OUTPUT_DIR") == 2
    # the defaults, and what differs from `mage train`'s final evaluation on purpose
    flat = " ".join(text.split())
    for said in ("evaluated as `mage train`'s final evaluation evaluates", "reads the full prompts with the rules",
                 "reflections are written only with --prompting reflexion or --agent reflexion", "(default: 300;",
                 "(default: 1000000000;"):
        assert said in flat, said


def test_a_local_model_without_torch_says_what_to_install(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "mage_agent", None)  # as if the [agent] extra were not installed
    assert main(["eval", "--agent", "react", "--model", "smollm2-135m", "--output-dir", str(tmp_path)]) == 2
    assert 'pip install -e ".[agent]"' in capsys.readouterr().err


def test_mage_eval_agent_openai_defaults_to_the_training_runs_protocol(tmp_path, capsys):
    prompts = []

    def reply(body: dict, headers: http.client.HTTPMessage) -> str:
        prompts.append(body["messages"][-1]["content"])
        return "<action>bet</action>"

    with chat_stub(reply) as url:
        assert main(["eval", "--agent", "openai", "--base-url", url, "--model", "m", "--eval-meta-episodes", "1",
                     "--no-oracle", "--quiet", "--output-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "eval_openai.json").read_text())
    assert list(report["opponents"]) == ["conservative", "aggressive", "intermediate", "bluffer", "calling-station",
                                         "maniac"]
    assert report["seed"] == 1_000_000_000 and report["num_episodes"] == 3
    assert report["env_kwargs"]["reflection"] is False and report["env_kwargs"]["prompt_style"] == "full"
    assert report["env_kwargs"]["invalid_action"]["penalty"] == -1.0
    assert prompts and not any("<reflection>" in p for p in prompts)   # no reflection was asked for
    assert all("The deck has three cards" in p for p in prompts)   # the full prompts, with the rules
    assert "mage: evaluation: mage/KuhnPoker-meta-v0, 6 opponents" in capsys.readouterr().err
