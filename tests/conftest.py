"""Shared fixtures: every test module can rely on the ids being registered."""

import mage_envs  # noqa: F401  (registers the mage/* ids)
