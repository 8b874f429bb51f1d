"""Agent tests need the [agent] extra; they are skipped cleanly without torch."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
