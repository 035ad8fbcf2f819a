"""A process-backed double of OpenSandbox (lifecycle API + execd) for the tests.

See README.md next to this file for what is implemented and the harness API.
"""

from doubles.opensandbox.harness import DoubleAdmin, OpenSandboxDouble

__all__ = ["DoubleAdmin", "OpenSandboxDouble"]
