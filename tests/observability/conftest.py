"""Fixtures of the audit and tracing tests (defined in ``audit_capture``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The test modules import ``audit_capture`` from this folder.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from audit_capture import capture  # noqa: E402

__all__ = ["capture"]
