"""The ``skillruntime`` command line (console entry point ``skillruntime.core.cli:main``).

:mod:`.app` holds the root group and ``runtimes``; :mod:`.runtime` the commands run against a
runtime (``exec``, ``files``); :mod:`.skills` the ``skills`` group; :mod:`.errors` the mapping of
library errors to short messages; :mod:`.progress` transfer progress. Plugins add command
groups (the artifact stores' ``artifacts`` group is :mod:`skillruntime.core.artifacts.cli`).
"""

from .app import SkillRuntimeGroup, build_cli, cli, main

__all__ = ["SkillRuntimeGroup", "build_cli", "cli", "main"]
