"""One trainer per run folder: a second process that trains into a folder in use stops at once."""

import subprocess
import sys
import textwrap

import pytest

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.run_lock import LOCK_FILE, RunFolderBusy, lock_run_folder
from mage_agent.trainer import Trainer

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mage_agent.run_lock import lock_run_folder
    lock_run_folder(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def held_elsewhere(tmp_path):
    """``tmp_path`` locked by another process (ended after the test)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield tmp_path, holder.pid
    holder.kill()
    holder.wait()


def test_a_folder_held_by_another_process_is_refused_naming_it(held_elsewhere):
    folder, pid = held_elsewhere
    with pytest.raises(RunFolderBusy, match=f"being trained by another process \\(pid {pid}\\)"):
        lock_run_folder(folder)


def test_a_trainer_stops_before_writing_and_the_cli_says_why(held_elsewhere, capsys):
    from mage_agent.cli import train_main

    folder, pid = held_elsewhere
    config = apply_overrides(TrainConfig(), {"output_dir": str(folder), "iterations": 1})
    with pytest.raises(RunFolderBusy):
        Trainer(config, progress=False)
    assert sorted(p.name for p in folder.iterdir()) == [LOCK_FILE]   # nothing written
    with pytest.raises(SystemExit):
        train_main(["--output-dir", str(folder), "--iterations", "1", "--quiet"])
    assert f"being trained by another process (pid {pid})" in capsys.readouterr().err


def test_the_lock_ends_with_its_process(tmp_path):
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                    "from mage_agent.run_lock import lock_run_folder; lock_run_folder(Path(sys.argv[1]))", str(tmp_path)],
                   check=True)
    assert lock_run_folder(tmp_path) is not None   # free again: this process holds it now
