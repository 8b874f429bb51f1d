"""MAGE's verifiers taskset under the top-level name verifiers resolves (``vf-eval mage-verifiers ...``).

verifiers imports a taskset by its id as a top-level module; the implementation is
:mod:`mage_envs.integrations.verifiers`.
"""

from mage_envs.integrations.verifiers import MageEnv, MageTaskset

__all__ = ["MageEnv", "MageTaskset"]
