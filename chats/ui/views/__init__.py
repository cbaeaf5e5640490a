"""Views of the web UI: thin adapters over the services and selectors."""

from .account import (
    account,
    account_delete_view,
    account_export,
    account_import,
    transfer_download,
)
from .attachments import message_image
from .composer import message_fit_view, message_versions_view
from .conversation_actions import (
    conversation_archive_view,
    conversation_delete_view,
    conversation_leave_view,
    conversation_rename_view,
    conversation_start_view,
    conversation_unarchive_view,
)
from .conversations import (
    conversation_detail,
    conversation_list,
    conversation_new,
    participant_add_view,
)
from .memories import (
    memory_add,
    memory_delete,
    memory_edit,
    memory_history,
    memory_list,
    memory_share,
)
from .meter import turn_meter
from .summaries import conversation_summaries
from .tenants import tenant_switch

__all__ = [
    "account",
    "account_delete_view",
    "account_export",
    "account_import",
    "conversation_archive_view",
    "conversation_delete_view",
    "conversation_detail",
    "conversation_leave_view",
    "conversation_list",
    "conversation_new",
    "conversation_rename_view",
    "conversation_start_view",
    "conversation_summaries",
    "conversation_unarchive_view",
    "memory_add",
    "memory_delete",
    "memory_edit",
    "memory_history",
    "memory_list",
    "memory_share",
    "message_fit_view",
    "message_image",
    "message_versions_view",
    "participant_add_view",
    "tenant_switch",
    "transfer_download",
    "turn_meter",
]
