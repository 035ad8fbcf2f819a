"""An in-process double of the OpenViking skill endpoints (see ``server.py``)."""

from .server import Faults, VikingDouble

__all__ = ["Faults", "VikingDouble"]
