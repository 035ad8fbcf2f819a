"""Default timeouts and the ``temp_root`` rule of the AIO runtime, importable without the clients.

The options model reads these, so ``skillruntime runtimes`` can describe the ``aio`` runtime
without importing the HTTP clients.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_READ_TIMEOUT", "TEMP_ROOT_PATTERN"]

DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to establish a connection to the service."""

DEFAULT_READ_TIMEOUT = 60.0
"""Seconds to wait for a response to a call that does not run a command."""

TEMP_ROOT_PATTERN = re.compile(r"/[A-Za-z0-9._/-]*")
"""What ``temp_root`` may look like: it is put into wrapper scripts, so only plain characters."""
