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

Every contract (numbered in ``docs/architecture.md``, "Contracts") is one test method; see
``docs/custom-runtime.md`` for the list and for running the kit a second time without a
conversation (``conversation_mode = False``).
"""

from .async_suite import AsyncRuntimeConformance
from .base import ConformanceBase
from .cancellation_contracts import CancellationContracts
from .context import ConformanceContext
from .conversation_contracts import ConversationContracts
from .driver_contracts import DriverConformance, DriverWorld
from .durability_contracts import DurabilityConformance
from .execute_contracts import ExecuteContracts, process_is_dead_command
from .file_error_contracts import FileErrorContracts
from .filesystem_contracts import FileSystemContracts
from .lifecycle_contracts import LifecycleContracts
from .loop_contracts import EventLoopContracts
from .permissions import immutable_host_directory
from .pool_contracts import PoolConformance, PoolWorld
from .prepare_contracts import PrepareContracts
from .search_contracts import SearchContracts
from .skills import SkillFactory
from .snapshot_contracts import (
    SNAPSHOT_CAPABILITY_TESTS,
    AsyncSnapshotConformance,
    SnapshotConformance,
    SnapshotWorld,
)
from .spy import BackendSpy, install_backend_spy
from .suite import (
    CAPABILITY_TESTS,
    CONVERSATION_ONLY_TESTS,
    COPY_TESTS,
    IN_PLACE_TESTS,
    SHARED_FILES_TESTS,
    RuntimeConformance,
)

__all__ = [
    "CAPABILITY_TESTS",
    "CONVERSATION_ONLY_TESTS",
    "COPY_TESTS",
    "IN_PLACE_TESTS",
    "SHARED_FILES_TESTS",
    "SNAPSHOT_CAPABILITY_TESTS",
    "AsyncRuntimeConformance",
    "AsyncSnapshotConformance",
    "BackendSpy",
    "CancellationContracts",
    "ConformanceBase",
    "ConformanceContext",
    "ConversationContracts",
    "DriverConformance",
    "DriverWorld",
    "DurabilityConformance",
    "EventLoopContracts",
    "ExecuteContracts",
    "FileErrorContracts",
    "FileSystemContracts",
    "LifecycleContracts",
    "PoolConformance",
    "PoolWorld",
    "PrepareContracts",
    "RuntimeConformance",
    "SearchContracts",
    "SkillFactory",
    "SnapshotConformance",
    "SnapshotWorld",
    "immutable_host_directory",
    "install_backend_spy",
    "process_is_dead_command",
]
