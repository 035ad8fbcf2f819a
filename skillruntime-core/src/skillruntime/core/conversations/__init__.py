"""Conversation stores: where a conversation's sandbox and prepared skills are recorded.

:mod:`.spi` holds the record, the store ABC and :func:`open_conversation_store`; :mod:`.memory`
the one-process store; :mod:`.sql` ``SqlConversationStore`` (extra ``skillruntime-core[sql]``,
imported only when used) with its client-side deadlines in :mod:`.sql_deadline`; :mod:`.plugin`
the built-in provider plugin and its ``skillruntime conversations`` commands.
"""

from typing import TYPE_CHECKING

from skillruntime.core._lazy import lazy_attributes

if TYPE_CHECKING:
    from .memory import InMemoryConversationStore
    from .spi import (
        ConversationRecord,
        ConversationStore,
        ConversationStoreError,
        modify_record,
        open_conversation_store,
        service_key_for_url,
        storage_key_for,
    )

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "InMemoryConversationStore": ".memory",
        "ConversationRecord": ".spi",
        "ConversationStore": ".spi",
        "ConversationStoreError": ".spi",
        "modify_record": ".spi",
        "open_conversation_store": ".spi",
        "service_key_for_url": ".spi",
        "storage_key_for": ".spi",
    },
)

__all__ = [
    "ConversationRecord",
    "ConversationStore",
    "ConversationStoreError",
    "InMemoryConversationStore",
    "modify_record",
    "open_conversation_store",
    "service_key_for_url",
    "storage_key_for",
]
