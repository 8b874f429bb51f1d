"""Data-parallel training with torchrun (2 CPU processes, gloo) against one process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mage_agent.distributed import World

WORKER = Path(__file__).with_name("distributed_worker.py")
MAGE = str(Path(sys.executable).with_name("mage"))  # the console script of this environment
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("distributed")
    run(TORCHRUN + [str(WORKER), str(folder)])
    return [json.loads((folder / f"report-{rank}.json").read_text()) for rank in (0, 1)]


def test_ranks_share_the_groups_and_pool_advantage_statistics(reports):
    for report in reports:
        assert report["same_start"]
        assert report["local_meta_episodes"] == 8  # 2 of the 4 groups x 4 copies each
        assert report["advantages_nonzero"] and report["advantages_equal"]  # bit-equal to one process
        assert report["diagnostics_equal"]  # per-archetype diagnostics of the whole batch on every rank


def test_summed_gradients_equal_the_whole_batch_gradient(reports):
    for report in reports:
        assert report["steps"] == [2, 2]  # 2 epochs x one minibatch, on both sides
        assert report["gradient_max_error"] < 1e-5 * report["gradient_scale"] + 1e-7
        assert report["parameter_max_error"] < 1e-4
        assert set(report["stats_keys"]) >= {"policy_loss", "kl", "entropy", "clip_fraction", "grad_norm"}


def test_ranks_stay_identical_and_log_the_whole_batch(reports):
    digests = reports[0]["digests"]
    assert digests[0] == digests[1] and reports[1]["digests"] == digests
    assert reports[0]["meta_episodes"] == [16, 16]


def test_torchrun_cli_trains_resumes_and_evaluates_on_rank_zero(tmp_path):
    out = tmp_path / "run"
    flags = ["--groups-per-iteration", "2", "--group-size", "2", "--minibatch-size", "8", "--checkpoint-every", "1",
             "--tensorboard", "false", "--output-dir", str(out), "--quiet"]
    run(TORCHRUN + ["--no-python", MAGE, "train", "--iterations", "1", "--eval-meta-episodes", "0"] + flags)
    run(TORCHRUN + ["--no-python", MAGE, "train", "--iterations", "2", "--eval-meta-episodes", "4", "--resume"]
        + flags)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [1, 2]
    assert all(m["meta_episodes"] == 4 for m in lines)
    assert (out / "checkpoints" / "latest").read_text() == "iter-000002"
    assert json.loads((out / "eval.json").read_text())["opponents"]


def test_groups_must_split_evenly():
    assert World(rank=1, size=2).shard_bounds(4) == (2, 4)
    with pytest.raises(ValueError, match="cannot be split evenly over 2 processes"):
        World(rank=0, size=2).shard_bounds(3)
