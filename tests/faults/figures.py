"""Figures measured by the fault suite, written where a stress run can collect them.

With ``SKILLRUNTIME_FAULT_REPORT=<path>`` every scenario appends one JSON line (operations,
faults injected, lost or duplicated records, slowest call and its documented bound); without it
nothing is written. Tests never assert durations: the bounds are proven by the calls returning,
the durations are reported.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

_LOCK = threading.Lock()


def record_figure(name: str, **figures: Any) -> None:
    """Append measured figures to ``$SKILLRUNTIME_FAULT_REPORT`` (JSON lines) when it is set."""
    path = os.environ.get("SKILLRUNTIME_FAULT_REPORT")
    if not path:
        return
    with _LOCK, open(path, "a", encoding="utf-8") as report:
        report.write(json.dumps({"scenario": name, **figures}, sort_keys=True) + "\n")
