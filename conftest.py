"""Collection for the default test run (``testpaths``: tests, mage_envs, mage_agent).

``mage_agent``'s doctests need the ``agent`` extra (torch, transformers): without it they
are left out of the run, as ``tests/agent`` skips itself.
"""

import importlib.util

collect_ignore_glob = (
    []
    if all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
    else ["mage_agent/*"]
)
