"""Invitations to a tenant: the services (``services``) and the accept page (``views``)."""

from .services import (
    InvitationNotAllowed,
    InvitationUnusable,
    invitation_accept,
    invitation_accept_new_user,
    invitation_create,
    invitation_link,
    invitation_revoke,
    invitation_usable,
)

__all__ = [
    "InvitationNotAllowed",
    "InvitationUnusable",
    "invitation_accept",
    "invitation_accept_new_user",
    "invitation_create",
    "invitation_link",
    "invitation_revoke",
    "invitation_usable",
]
