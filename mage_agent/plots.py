"""Plots people would rather look at than read: evaluation by episode index, training curves.

Example:
    >>> import json, tempfile, pathlib
    >>> report = {"env_id": "mage/KuhnPoker-meta-v0", "agent": "policy", "opponents": {"nash": {
    ...     "mean_return_by_episode": [0.0, 0.1], "stderr_return_by_episode": [0.1, 0.1],
    ...     "success_by_episode": [0.5, 0.6], "best_response_value": 0.0, "equilibrium_value": 0.0}}}
    >>> out = plot_evaluation(report, pathlib.Path(tempfile.mkdtemp()) / "eval.png")
    >>> out.exists()
    True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_evaluation(report: dict[str, Any], path: Path) -> Path:
    """Return (with SE bars) and success by episode index, one line per archetype; the
    oracle best-response value (dashed; with fresh deals, its value on each episode index's
    own deals), the equilibrium value (dotted) and, for repeated instances, the value of
    knowing the deal (dash-dot) per archetype."""
    fig, (ax_return, ax_success) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (name, result) in enumerate(report["opponents"].items()):
        color = colors[k % len(colors)]
        episodes = range(1, len(result["mean_return_by_episode"]) + 1)
        ax_return.errorbar(episodes, result["mean_return_by_episode"], yerr=result["stderr_return_by_episode"],
                           marker="o", capsize=3, color=color, label=name)
        if result.get("best_response_by_episode"):
            ax_return.plot(list(episodes), result["best_response_by_episode"], color=color, linestyle="--",
                           linewidth=0.9, alpha=0.7)
        elif result.get("best_response_value") is not None:
            ax_return.axhline(result["best_response_value"], color=color, linestyle="--", linewidth=0.9, alpha=0.7)
        if result.get("equilibrium_value") is not None:
            ax_return.axhline(result["equilibrium_value"], color=color, linestyle=":", linewidth=0.9, alpha=0.7)
        if result.get("instance_optimal_value") is not None:
            ax_return.axhline(result["instance_optimal_value"], color=color, linestyle="-.", linewidth=0.9, alpha=0.5)
        ax_success.plot(list(episodes), result["success_by_episode"], marker="o", color=color, label=name)
    ax_return.set(title="Return by episode (-- best response, .. equilibrium, -. deal known)",
                  xlabel="episode in meta-episode",
                  ylabel="mean return")
    ax_success.set(title="Success (win) rate by episode index", xlabel="episode in meta-episode", ylabel="rate",
                   ylim=(0, 1))
    for ax in (ax_return, ax_success):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    ax_success.legend(fontsize=7, loc="best")
    fig.suptitle(f"{report.get('agent', '')} on {report.get('env_id', '')}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_training(metrics_path: Path, path: Path) -> Path:
    """Training curves from ``metrics.jsonl``: return per episode index, entropy, KL and, where
    measured, the first hand's exact exploitability."""
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    measured = [r for r in rows if "exploitability" in r]
    rated = sorted({key for r in rows for key in r if key.startswith("rating/")})
    panels = 2 + bool(measured) + bool(rated)
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4))
    ax_return, ax_entropy = axes[0], axes[1]
    if measured:
        axes[2].plot([r["iteration"] for r in measured], [r["exploitability"] for r in measured], marker="o",
                     label="exploitability (NashConv / 2)")
        axes[2].set(title="First hand's exact exploitability", xlabel="iteration", ylabel="chips per hand", ylim=(0, None))
        axes[2].legend()
        axes[2].grid(alpha=0.3)
    if rated:   # a league run: every member's rating while it is in the league
        ax_rating = axes[-1]
        for key in rated:
            points = [(r["iteration"], r[key]) for r in rows if key in r]
            ax_rating.plot([i for i, _ in points], _smooth([v for _, v in points]), label=key[7:],
                           linewidth=2.2 if key == "rating/learner" else 0.9)
        ax_rating.set(title="League ratings (OpenSkill ordinal, smoothed)", xlabel="iteration")
        ax_rating.legend(fontsize=6)
        ax_rating.grid(alpha=0.3)
    iterations = [r["iteration"] for r in rows]
    keys = sorted((k for k in rows[0] if k.startswith("return_ep")), key=lambda k: int(k[9:]))
    for key in keys:
        ax_return.plot(iterations, _smooth([r[key] for r in rows]), label=key.replace("return_", ""))
    ax_return.set(title="Training return by episode index (smoothed)", xlabel="iteration", ylabel="return")
    ax_return.legend()
    ax_entropy.plot(iterations, [r.get("entropy", float("nan")) for r in rows], label="entropy")
    ax_entropy.plot(iterations, [r.get("approx_kl", float("nan")) for r in rows], label="approx KL")
    ax_entropy.set(title="Policy entropy and approx KL", xlabel="iteration")
    ax_entropy.legend()
    for ax in (ax_return, ax_entropy):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _smooth(values: list[float], window: int = 20) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out
