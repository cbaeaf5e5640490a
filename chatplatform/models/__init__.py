from .invitations import Invitation, InvitationStatus
from .policies import ContextPolicy, Strategy
from .profiles import ModelProfile
from .tenants import ApiKey, Membership, Role, Tenant

__all__ = [
    "ApiKey",
    "ContextPolicy",
    "Invitation",
    "InvitationStatus",
    "Membership",
    "ModelProfile",
    "Role",
    "Strategy",
    "Tenant",
]
