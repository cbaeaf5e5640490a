from . import conversations  # noqa: F401  (the conversation records, this app's models too)
from .invitations import Invitation, InvitationStatus
from .policies import ContextPolicy, Strategy
from .profiles import ModelProfile, Provider
from .tenants import ApiKey, Membership, Role, Tenant

__all__ = [
    "ApiKey",
    "ContextPolicy",
    "Invitation",
    "InvitationStatus",
    "Membership",
    "ModelProfile",
    "Provider",
    "Role",
    "Strategy",
    "Tenant",
]
