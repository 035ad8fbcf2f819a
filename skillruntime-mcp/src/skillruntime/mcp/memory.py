"""Handing freed memory back to the system once the HTTP server has no session left.

A server that served many sessions at once keeps its high-water mark after they end: the
Python objects of the sessions are freed, but the allocators keep the memory (glibc's malloc
keeps freed chunks in its arenas; pymalloc keeps a 1 MiB arena while one object in it lives).
See docs/mcp.md "Memory".

:func:`release_free_memory` is run by the HTTP server's session manager a few seconds after the
last open session has ended (see :mod:`skillruntime.mcp.http` and :mod:`skillruntime.mcp.sessions`):
a full garbage collection (cycles left by the sessions
free their objects, and pymalloc its arenas that become empty), then, on glibc,
``malloc_trim(0)`` (the free pages of every malloc arena are returned). Both cost a few
milliseconds with no session open. Objects pymalloc keeps in a partly used arena are out of
reach of both: ``PYTHONMALLOC=malloc`` in the server's environment puts them in reach.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import platform
from collections.abc import Callable
from functools import cache

__all__ = ["release_free_memory"]

logger = logging.getLogger(__name__)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` on another C library."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError) as exc:
        logger.debug("malloc_trim is not available: %s", exc)
        return None
    trim.argtypes = [ctypes.c_size_t]  # type: ignore[attr-defined]
    trim.restype = ctypes.c_int  # type: ignore[attr-defined]
    return trim


def release_free_memory() -> bool:
    """Collect garbage, then return glibc's free pages to the system (``malloc_trim(0)``).

    Returns whether ``malloc_trim`` ran (``False`` off glibc, where only the collection runs).
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
