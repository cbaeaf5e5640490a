from . import conversations  # noqa: F401  (the conversation records, this app's models too)
from .audit import AuditAction, AuditEvent
from .identity import IdentityProvider
from .invitations import Invitation, InvitationStatus
from .policies import ContextPolicy
from .profiles import ModelProfile
from .spending import MonthlySpend
from .tenants import ApiKey, Membership, MembershipRole, Tenant
from .transfers import Transfer, TransferFormat, TransferKind, TransferStatus

__all__ = [
    "ApiKey",
    "AuditAction",
    "AuditEvent",
    "ContextPolicy",
    "IdentityProvider",
    "Invitation",
    "InvitationStatus",
    "Membership",
    "MembershipRole",
    "ModelProfile",
    "MonthlySpend",
    "Tenant",
    "Transfer",
    "TransferFormat",
    "TransferKind",
    "TransferStatus",
]
