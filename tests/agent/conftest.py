"""Agent tests need the [agent] extra; they are skipped cleanly without torch."""

import inspect

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture
def train_until_killed(monkeypatch):
    """``train_until_killed(trainer, stage, iteration)``: train until the trainer's ``stage``
    method (``collect``, ``update``...) is called for ``iteration``, and die there as a
    killed run would (the checkpoints written before stay)."""

    def run(trainer, stage: str, iteration: int) -> None:
        original = getattr(trainer, stage)
        signature = inspect.signature(original)

        def dying(*args, **kwargs):
            if signature.bind(*args, **kwargs).arguments["iteration"] == iteration:
                raise KeyboardInterrupt("killed")
            return original(*args, **kwargs)

        monkeypatch.setattr(trainer, stage, dying)
        with pytest.raises(KeyboardInterrupt):
            trainer.train()

    return run
