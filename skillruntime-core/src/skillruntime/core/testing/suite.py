""":class:`RuntimeConformance`: every contract of DESIGN §3 as one pytest test class."""

from __future__ import annotations

from typing import Any, ClassVar

from .conversation_contracts import ConversationContracts
from .execute_contracts import ExecuteContracts
from .filesystem_contracts import FileSystemContracts
from .lifecycle_contracts import LifecycleContracts
from .prepare_contracts import PrepareContracts

__all__ = ["CAPABILITY_TESTS", "RuntimeConformance"]

CAPABILITY_TESTS: dict[str, tuple[str, type[Any]]] = {
    "test_symlink_cannot_carry_a_file_operation_out": ("resolves_symlinks", ConversationContracts),
    "test_memory_stays_bounded_whatever_the_command_prints": (
        "bounds_output_memory",
        ExecuteContracts,
    ),
}
"""Tests that exist on a subclass only when its capability flag is on (never skipped)."""


class RuntimeConformance(
    PrepareContracts,
    ExecuteContracts,
    FileSystemContracts,
    ConversationContracts,
    LifecycleContracts,
):
    """Subclass it as ``Test<YourRuntime>`` and implement :meth:`make_runtime`.

    Every ``test_*`` method checks one contract against runtimes built by your hook; failures
    name the contract. Capability flags (``resolves_symlinks``, ``bounds_output_memory``,
    ``supports_base_environment``, ``resumes_prepared_skills``) describe optional behaviour; a
    test tied to a flag that is off is removed from the subclass rather than skipped.
    """

    contract_names: ClassVar[tuple[str, ...]] = ()
    """Names of the contract tests this class runs (filled in per subclass)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for test_name, (flag, owner) in CAPABILITY_TESTS.items():
            if getattr(cls, flag):
                if getattr(cls, test_name, None) is None:
                    setattr(cls, test_name, owner.__dict__[test_name])
            else:
                setattr(cls, test_name, None)
        cls.contract_names = tuple(
            sorted(
                name
                for name in dir(cls)
                if name.startswith("test_") and callable(getattr(cls, name, None))
            )
        )
