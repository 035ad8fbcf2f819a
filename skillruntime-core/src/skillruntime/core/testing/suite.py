""":class:`RuntimeConformance`: every contract of ``docs/architecture.md`` as one test class."""

from __future__ import annotations

from typing import Any, ClassVar

from .conversation_contracts import ConversationContracts
from .execute_contracts import ExecuteContracts
from .file_error_contracts import FileErrorContracts
from .filesystem_contracts import FileSystemContracts
from .lifecycle_contracts import LifecycleContracts
from .prepare_contracts import PrepareContracts
from .search_contracts import SearchContracts

__all__ = [
    "CAPABILITY_TESTS",
    "CONVERSATION_ONLY_TESTS",
    "COPY_TESTS",
    "IN_PLACE_TESTS",
    "SHARED_FILES_TESTS",
    "RuntimeConformance",
]

CAPABILITY_TESTS: dict[str, tuple[str, type[Any]]] = {
    "test_symlink_cannot_carry_a_file_operation_out": ("resolves_symlinks", ConversationContracts),
    "test_memory_stays_bounded_whatever_the_command_prints": (
        "bounds_output_memory",
        ExecuteContracts,
    ),
    "test_writes_into_an_unwritable_directory_are_permission_denied": (
        "makes_unwritable_directories",
        FileErrorContracts,
    ),
}
"""Tests that exist on a subclass only when its capability flag is on (never skipped)."""

CONVERSATION_ONLY_TESTS: frozenset[str] = frozenset(
    {
        "test_dot_dot_escape_is_refused_before_any_backend_call",
        "test_absolute_path_outside_is_refused_before_any_backend_call",
        "test_prefix_sibling_is_not_inside_the_workspace",
        "test_the_workspace_itself_cannot_be_deleted",
        "test_invalid_conversation_ids_are_rejected",
        "test_symlink_cannot_carry_a_file_operation_out",
    }
)
"""Contracts of the conversation workspace, removed when ``conversation_mode`` is off."""

SHARED_FILES_TESTS: frozenset[str] = frozenset(
    {
        "test_resumed_runtime_sees_files_and_keeps_prepared_skills",
        "test_close_keeps_the_conversation_workspace",
    }
)
"""Contracts that need a second runtime object to see the first one's files; removed when
``keeps_files_across_runtime_objects`` is off."""

COPY_TESTS: frozenset[str] = frozenset(
    {
        "test_prepare_returns_new_objects_and_leaves_inputs_untouched",
        "test_prepared_copy_lives_under_workspace_skills_named_by_digest",
        "test_upload_policy_excludes_symlinks_git_env_and_credentials",
        "test_same_content_from_another_directory_reuses_the_prepared_copy",
        "test_changed_content_gets_a_new_copy",
        "test_other_bootstrap_commands_get_another_copy",
        # Their bootstraps write into the skill root, which in place changes the skill's content.
        "test_preparing_same_content_again_bootstraps_nothing",
        "test_bootstrap_failure_caches_nothing_and_next_prepare_retries",
    }
)
"""Contracts of prepared copies, removed when ``prepares_in_place`` is on."""

IN_PLACE_TESTS: frozenset[str] = frozenset({"test_prepare_in_place_returns_the_source_directory"})
"""Contracts of in-place preparation, present only when ``prepares_in_place`` is on."""


def _removed(cls: type[Any]) -> set[str]:
    """The kit tests a subclass does not run, from its mode and capability flags."""
    if cls.conversation_mode and (
        cls.prepares_in_place or not cls.keeps_files_across_runtime_objects
    ):
        raise TypeError(
            f"{cls.__name__}: prepares_in_place and keeps_files_across_runtime_objects=False "
            "describe runtimes without a conversation; set conversation_mode = False"
        )
    removed = {name for name, (flag, _) in CAPABILITY_TESTS.items() if not getattr(cls, flag)}
    if not cls.conversation_mode:
        removed |= CONVERSATION_ONLY_TESTS
    if not cls.keeps_files_across_runtime_objects:
        removed |= SHARED_FILES_TESTS
    removed |= COPY_TESTS if cls.prepares_in_place else IN_PLACE_TESTS
    return removed


_GROUPS: tuple[type[Any], ...] = (
    PrepareContracts,
    ExecuteContracts,
    FileSystemContracts,
    SearchContracts,
    FileErrorContracts,
    ConversationContracts,
    LifecycleContracts,
)

_OWNERS: dict[str, type[Any]] = {
    name: group for group in _GROUPS for name in vars(group) if name.startswith("test_")
}
"""Every kit test and the contract group that defines it."""


class RuntimeConformance(
    PrepareContracts,
    ExecuteContracts,
    FileSystemContracts,
    SearchContracts,
    FileErrorContracts,
    ConversationContracts,
    LifecycleContracts,
):
    """Subclass it as ``Test<YourRuntime>`` and implement :meth:`make_runtime`.

    Every ``test_*`` method checks one contract against runtimes built by your hook; failures
    name the contract. Capability flags (``resolves_symlinks``, ``bounds_output_memory``,
    ``supports_base_environment``, ``resumes_prepared_skills``, ``makes_unwritable_directories``)
    describe optional behaviour, and ``conversation_mode``, ``prepares_in_place`` and
    ``keeps_files_across_runtime_objects`` the mode a subclass runs in; a test that does not
    apply is removed from the subclass rather than skipped.
    """

    contract_names: ClassVar[tuple[str, ...]] = ()
    """Names of the contract tests this class runs (filled in per subclass)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        removed = _removed(cls)
        for test_name, owner in _OWNERS.items():
            if test_name in removed:
                setattr(cls, test_name, None)
            elif getattr(cls, test_name, None) is None:
                setattr(cls, test_name, owner.__dict__[test_name])
        cls.contract_names = tuple(
            sorted(
                name
                for name in dir(cls)
                if name.startswith("test_") and callable(getattr(cls, name, None))
            )
        )
