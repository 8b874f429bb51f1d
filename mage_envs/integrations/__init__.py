"""Adapters to other libraries' training loops, each in its own module, imported on demand.

``import mage_envs`` imports none of them. :mod:`mage_envs.integrations.trl` serves TRL's
``GRPOTrainer`` (``pip install "mage-rl[trl]"``).
"""
