"""Lazy package attributes: a package re-exports names whose modules load on first access.

A package ``__init__`` calls :func:`lazy_attributes` with the name of each re-exported object and
the submodule that defines it, and binds the returned ``__getattr__`` and ``__dir__``; importing
the package then costs nothing beyond the package itself, and ``package.Name`` (or ``from package
import Name``) imports only the submodule that holds ``Name``. Type checkers read the same names
from imports under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` serving ``exports`` (name -> ``.module``).

    The first access of a name imports its module, caches the object in the package's namespace
    (so later accesses are plain attribute reads) and returns it. An unknown name raises
    :class:`AttributeError` as a module without the hook would.
    """
    table = dict(exports)

    def getattr_(name: str) -> Any:
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return getattr_, dir_
