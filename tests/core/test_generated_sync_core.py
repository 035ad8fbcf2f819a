"""Core's generated sync modules export what their async sources do.

``tests/aio/test_generated_sync.py`` checks that every generated module of the repository
(core's ``exclusive`` among them) matches its async source and says it is generated; this suite
checks that the two faces of the exclusive guards export the same names.
"""

from __future__ import annotations

from skillruntime.core.conversations import async_exclusive, exclusive


def test_both_faces_of_the_exclusive_guards_export_the_same_names() -> None:
    unprefixed = {name.removeprefix("Async") for name in async_exclusive.__all__}
    assert unprefixed == set(exclusive.__all__)
    assert exclusive.workspace_guard.__kwdefaults__["guard_type"] is exclusive.ConversationGuard
    async_default = async_exclusive.workspace_guard.__kwdefaults__["guard_type"]
    assert async_default is async_exclusive.AsyncConversationGuard
    assert issubclass(exclusive.ConversationGuard, exclusive.ConversationGuardBase)
    assert async_exclusive.ConversationGuardBase is exclusive.ConversationGuardBase
