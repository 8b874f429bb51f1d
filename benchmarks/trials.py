"""One table of tuning trials: finished ``mage train`` runs, what each changed and what it got.

For every run folder given: the settings that differ from ``TrainConfig()``'s defaults (the
trial's recipe; ``output_dir`` left out), the seconds of training, the first hand's exact
exploitability along the run when it was tracked (Kuhn, Leduc), and the final evaluation
(``eval.json``): per opponent the return, success or win rate by episode and, where there is
one, the final episode's share of its deal-known ceiling. Runs without ``eval.json`` are
listed as unfinished. The table is JSON, so trials chosen on a tuning seed stay on record
beside the reported seeds.

    python benchmarks/trials.py runs/lbr/* --note "league trials, seed 0" --out benchmarks/results/league-trials-s0.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def changed_settings(config: dict[str, Any]) -> dict[str, Any]:
    """The fields of a saved config (``config.json``) that differ from the defaults.

    Example:
        >>> from mage_agent.build import resolved
        >>> from mage_agent.config import TrainConfig
        >>> saved = resolved(TrainConfig()).to_dict()   # a run saves its population written out
        >>> saved["algo"]["learning_rate"] = 3e-3
        >>> changed_settings(saved)
        {'learning_rate': 0.003}
    """
    from mage_agent.build import equilibrium_coef_of, resolved
    from mage_agent.config import TrainConfig, apply_overrides

    env_id = config.get("env", {}).get("env_id", TrainConfig().env.env_id)
    default = resolved(apply_overrides(TrainConfig(), {"env_id": env_id})).to_dict()   # the game's population
    # the first-hand anchor's default follows the run's own settings (model, answers, sampling)
    default["algo"]["equilibrium_coef"] = equilibrium_coef_of(
        apply_overrides(TrainConfig.from_dict(config), {"equilibrium_coef": None}))
    return {key: value for section, fields in config.items() for key, value in fields.items()
            if key != "output_dir" and default.get(section, {}).get(key) != value}


def trial(folder: Path) -> dict[str, Any]:
    """One run's row."""
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    row: dict[str, Any] = {
        "run": folder.name, "settings": changed_settings(json.loads((folder / "config.json").read_text())),
        "iterations_done": len(metrics), "train_seconds": round(sum(m.get("seconds", 0.0) for m in metrics), 1),
    }
    track = [(m["iteration"], round(m["exploitability"], 4)) for m in metrics if "exploitability" in m]
    if track:
        row["exploitability"] = track
    evaluation = folder / "eval.json"
    if not evaluation.exists():
        row["unfinished"] = True
        return row
    row["eval"] = {}
    for name, result in json.loads(evaluation.read_text())["opponents"].items():
        entry = {"return_by_episode": [round(r, 4) for r in result["mean_return_by_episode"]],
                 "win_rate_by_episode": result["win_rate_by_episode"]}
        ceiling = result.get("instance_optimal_value")
        if ceiling:
            entry["ceiling"] = round(ceiling, 4)
            entry["final_share"] = round(result["mean_return_by_episode"][-1] / ceiling, 4)
        row["eval"][name] = entry
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (a metrics.jsonl and config.json each)")
    parser.add_argument("--note", default="", help="what the trials were for, kept in the file")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows = [trial(folder) for folder in sorted(args.runs) if (folder / "metrics.jsonl").exists()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"note": args.note, "trials": rows}, indent=1) + "\n")
    for row in rows:
        last = row.get("exploitability", [[None, None]])[-1][1]
        print(f"{row['run']:<32} {row['train_seconds']:>7.0f} s  exploitability {last}  "
              + ("unfinished" if row.get("unfinished") else
                 " ".join(f"{k} {v.get('final_share', v['win_rate_by_episode'][-1]):.2f}" for k, v in row["eval"].items())))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
