"""The one reader of a frontmatter ``allowed-tools`` value into its entries.

A string is split on whitespace and commas *outside parentheses*, so
``"Bash(git:*) Bash(python *), Read"`` is the three entries ``Bash(git:*)``, ``Bash(python *)`` and
``Read``; a list contributes each item split the same way. Both
:attr:`Skill.allowed_tools <skillruntime.core.models.Skill.allowed_tools>` and the tool policy
(:func:`skillruntime.core.tools.policy.parse_allowed_tools`) read entries through here. The
function is defined in the ground layer (``skillruntime.core._allowed_tools``) because
:mod:`skillruntime.core.models` uses it too.
"""

from __future__ import annotations

from .._allowed_tools import split_allowed_tools

__all__ = ["split_allowed_tools"]
