"""``Closeable``: the context-manager protocol shared by everything with a ``close()``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["Closeable"]


class Closeable:
    """Mixin: ``with obj:`` returns ``obj`` and calls ``obj.close()`` on the way out.

    Subclasses define :meth:`close`; it should be idempotent.
    """

    def close(self) -> None:
        """Release what the object holds (subclasses override)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
