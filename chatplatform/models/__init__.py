from .invitations import Invitation, InvitationStatus
from .policies import ContextPolicy
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
    "Tenant",
]
