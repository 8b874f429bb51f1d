"""`mage view`: the report's data, its self-containment and its server (the page in a
browser: tests/agent/test_view_browser.py)."""

import json
import re
import threading
import urllib.error
import urllib.request

import pytest

from mage_envs.cli import main
from mage_envs.view import collect, render
from mage_envs.view.serve import report_server, serve


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory):
    """A real evaluation folder: two agents, reflections on, transcripts with and without steps."""
    out = tmp_path_factory.mktemp("eval")
    for agent in ("random", "best-response"):
        assert main(["eval", "--agent", agent, "--opponents", "aggressive,nash", "--meta-episodes", "5",
                     "--transcript-steps", "3", "--env-kwarg", "reflection=true", "--output-dir", str(out),
                     "--quiet"]) == 0
    return out


def test_collect_reads_the_evaluations_and_the_replayable_records(eval_dir):
    data = collect(eval_dir, replays_per_opponent=2)
    assert sorted(data["evaluations"]) == sorted(data["transcripts"]) == ["best-response", "random"]
    assert data["evaluations"]["random"] == {**json.loads((eval_dir / "eval_random.json").read_text()),
                                             "file": "eval_random.json"}
    records = [json.loads(line) for line in (eval_dir / "transcript_random.jsonl").read_text().splitlines()]
    replays = data["transcripts"]["random"]
    assert [(r["opponent"], r["index"]) for r in replays] == [("aggressive", 0), ("aggressive", 1), ("nash", 0),
                                                              ("nash", 1)]
    first = next(r for r in records if (r["opponent"], r["index"]) == ("aggressive", 0))
    assert [s["answer"] for s in replays[0]["steps"]] == [s["answer"] for s in first["steps"]]
    assert replays[0]["instance"] == str(first["instance"][0]) and replays[0]["seat"] == first["instance"][1]
    reflections = [s for s in replays[0]["steps"] if s["phase"] == "reflect"]
    assert [s["episode"] for s in reflections] == [0, 1]   # between hands 1-2 and 2-3
    assert replays[0]["final_observation"].count("Hand over") >= 1
    assert len(collect(eval_dir)["transcripts"]["random"]) == 2 * 3   # only records with steps are replayed


def test_the_page_is_self_contained(eval_dir):
    page = render(collect(eval_dir))
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\(", page, re.IGNORECASE)
    assert "http://" not in page.replace('"http://www.w3.org/2000/svg"', "") and "https://" not in page
    assert "default-src 'none'" in page   # and the browser is told to fetch nothing
    data = re.search(r'<script type="application/json" id="mage-data">(.*?)</script>', page, re.DOTALL).group(1)
    assert "<" not in data and json.loads(data) == json.loads(json.dumps(collect(eval_dir)))


def test_mage_view_writes_the_report_and_refuses_a_missing_folder(eval_dir, tmp_path, capsys):
    assert main(["view", str(eval_dir)]) == 0
    assert f"wrote {eval_dir / 'report.html'}" in capsys.readouterr().out
    assert (eval_dir / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert main(["view", str(tmp_path / "nothing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_the_server_answers_with_the_page_on_loopback_only(tmp_path):
    page = tmp_path / "report.html"
    page.write_text("<p>report</p>")
    server = report_server(page, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        root = f"http://127.0.0.1:{server.server_address[1]}"
        assert urllib.request.urlopen(root + "/").read() == b"<p>report</p>"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(root + "/config.json")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ValueError, match="--allow-remote"):
        serve(page, host="0.0.0.0")
