"""``Closeable`` and ``AsyncCloseable``: the (async) context-manager protocol of everything with a
``close()``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncCloseable", "Closeable"]


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


class AsyncCloseable:
    """Mixin: ``async with obj:`` returns ``obj`` and awaits ``obj.close()`` on the way out.

    Subclasses define the coroutine :meth:`close`; it should be idempotent.
    """

    async def close(self) -> None:
        """Release what the object holds (subclasses override)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
