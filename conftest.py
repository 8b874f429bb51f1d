"""Collection for the default test run (``testpaths``: tests, mage_envs, mage_agent).

``mage_agent``'s doctests need the ``agent`` extra (torch, transformers): without it they
are left out of the run, as ``tests/agent`` skips itself. Likewise the modules that import
verifiers (the ``verifiers`` extra) without it; ``tests/test_verifiers.py`` skips itself.
"""

import importlib.util


def _installed(*names: str) -> bool:
    return all(importlib.util.find_spec(name) is not None for name in names)


collect_ignore_glob = [] if _installed("torch", "transformers", "peft") else ["mage_agent/*"]
if not _installed("verifiers"):
    collect_ignore_glob += ["mage_envs/integrations/verifiers.py", "tests/sse_done_relay.py"]
