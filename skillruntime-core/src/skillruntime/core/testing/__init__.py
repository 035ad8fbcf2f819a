"""The conformance kit: prove a :class:`~skillruntime.core.SkillRuntime` with a few lines of pytest.

.. code-block:: python

    from skillruntime.core.testing import RuntimeConformance

    class TestMyRuntime(RuntimeConformance):
        def make_runtime(self, *, conversation_id, conversations_root, base_environment):
            return MyRuntime(
                conversation_id=conversation_id,
                conversations_root=conversations_root,
                base_environment=base_environment,
            )

Every contract of DESIGN §3 is one test method; see ``docs/custom-runtime.md`` for the list.
"""

from .async_suite import AsyncRuntimeConformance
from .base import ConformanceBase
from .cancellation_contracts import CancellationContracts
from .context import ConformanceContext
from .conversation_contracts import ConversationContracts
from .execute_contracts import ExecuteContracts, process_is_dead_command
from .filesystem_contracts import FileSystemContracts
from .lifecycle_contracts import LifecycleContracts
from .prepare_contracts import PrepareContracts
from .skills import SkillFactory
from .spy import BackendSpy, install_backend_spy
from .suite import CAPABILITY_TESTS, RuntimeConformance

__all__ = [
    "CAPABILITY_TESTS",
    "AsyncRuntimeConformance",
    "BackendSpy",
    "CancellationContracts",
    "ConformanceBase",
    "ConformanceContext",
    "ConversationContracts",
    "ExecuteContracts",
    "FileSystemContracts",
    "LifecycleContracts",
    "PrepareContracts",
    "RuntimeConformance",
    "SkillFactory",
    "install_backend_spy",
    "process_is_dead_command",
]
