"""How long a conversation socket may stay open: while the credential that opened it holds.
The same holds for a reply's event stream (the REST API's server-sent events,
:mod:`chats.api.streaming`): it listens to the same groups and ends the same way.

A socket is opened with a credential (the browser session, or a tenant API key) and stays open
only while that credential and what it granted still hold: the key is not revoked and still
acts for the same user, the session still exists and is still the user's (logging out deletes
it; a new password invalidates it), the user is active, a member of the conversation's tenant
(the tenant active) and a participant of the conversation. This module says which groups a
socket joins for that, checks a grant, and tells the sockets when something changed:

- Events: revoking, changing or deleting a key, removing or changing a membership or a
  participant, saving a user (deactivation, a new password), deactivating a tenant send
  ``access.changed`` to the groups of the user, the key or the tenant once the change is
  committed; every socket in them checks its grant at once and closes (4401 or 4403) when it
  no longer holds. Logging out names the ended session (by digest), and the sockets it
  opened close without a query.
- A safety net: channel-layer delivery is at most once, so a socket also checks its grant
  before it handles a frame or passes on an event once its last check is older than
  ``WS_AUTH_RECHECK_SECONDS``. A check is two or three indexed queries, measured at 1.5 to
  4 ms (SQLite, PostgreSQL) on the 2-core benchmark machine, about what a whole turn costs the
  ASGI process (docs/scaling.md): on every frame and every delta it would more than double
  that, so it runs at most that often per socket.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
    user_logged_out,
)
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils.crypto import constant_time_compare

from chatplatform.models import ApiKey, Membership, Tenant
from chatplatform.models.conversations import Participant
from chatplatform.tenancy.scoping import tenant_scope

logger = logging.getLogger(__name__)

#: The credential that opened the socket no longer holds (key revoked, session ended, user
#: deactivated).
CLOSE_CREDENTIALS_ENDED = 4401
#: The credential holds, but no longer grants this conversation (membership or participant
#: removed, tenant deactivated).
CLOSE_ACCESS_ENDED = 4403
#: The channel-layer message type (handled by the consumer's ``access_changed``).
ACCESS_CHANGED = "access.changed"

#: Why a grant ended: its close code -> the ``error`` event's code and message, sent last on
#: a socket or an event stream.
GRANT_ENDED = {
    CLOSE_CREDENTIALS_ENDED: (
        "credentials_ended",
        "The key or session that opened this connection is no longer valid.",
    ),
    CLOSE_ACCESS_ENDED: ("access_ended", "You no longer have access to this conversation."),
}


@dataclass(frozen=True)
class SocketGrant:
    """What opened a conversation socket: the user, in the conversation's tenant, by an API
    key (``key_id``) or a browser session (``session_key``)."""

    tenant_id: int
    conversation_id: int
    user_id: int
    key_id: int | None = None
    session_key: str | None = None

    def groups(self) -> list[str]:
        """The channel-layer groups that hear when this grant may have ended."""
        groups = [user_group(self.user_id), tenant_group(self.tenant_id)]
        if self.key_id is not None:
            groups.append(key_group(self.key_id))
        return groups

    @property
    def session_digest(self) -> str | None:
        return session_digest(self.session_key) if self.session_key else None


def user_group(user_id: int) -> str:
    return f"access.u{user_id}"


def key_group(key_id: int) -> str:
    return f"access.k{key_id}"


def tenant_group(tenant_id: int) -> str:
    return f"access.t{tenant_id}"


def session_digest(session_key: str) -> str:
    """Names a session on the channel layer without putting the session key (a credential)
    there."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:32]


def grant_refusal(grant: SocketGrant) -> int | None:
    """None while ``grant`` holds; else the close code saying why it does not."""
    if grant.key_id is not None:
        with tenant_scope(grant.tenant_id):
            key = (
                ApiKey.objects.filter(pk=grant.key_id, revoked_at__isnull=True)
                .values_list("user_id", "tenant__service_user_id")
                .first()
            )
        if key is None or (key[0] or key[1]) != grant.user_id:
            return CLOSE_CREDENTIALS_ENDED
    if grant.session_key is not None and _session_user_id(grant.session_key) != grant.user_id:
        return CLOSE_CREDENTIALS_ENDED
    with tenant_scope(grant.tenant_id):
        row = (
            get_user_model()
            .objects.filter(pk=grant.user_id)
            .annotate(
                member=Exists(
                    Membership.objects.filter(user=OuterRef("pk"), tenant__is_active=True)
                ),
                participant=Exists(
                    Participant.objects.filter(
                        conversation_id=grant.conversation_id, user=OuterRef("pk")
                    )
                ),
            )
            .values_list("is_active", "member", "participant")
            .first()
        )
    if row is None or not row[0]:
        return CLOSE_CREDENTIALS_ENDED
    if not (row[1] and row[2]):
        return CLOSE_ACCESS_ENDED
    return None


def _session_user_id(session_key: str) -> Any:
    """The id of the user the session is logged in as, or None: the session is gone (logged
    out, expired) or no longer verifies (the user's password changed). As Django's
    ``get_user``, without its side effects on the session."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    data = store.load()
    user_id, backend_path = data.get(SESSION_KEY), data.get(BACKEND_SESSION_KEY)
    session_hash = data.get(HASH_SESSION_KEY)
    if not (user_id and session_hash and backend_path in settings.AUTHENTICATION_BACKENDS):
        return None
    user = load_backend(backend_path).get_user(get_user_model()._meta.pk.to_python(user_id))
    if user is None:
        return None
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not any(constant_time_compare(session_hash, known) for known in hashes):
        return None
    return user.pk


# --- telling the sockets ----------------------------------------------------------------------


def announce_on_commit(groups: Iterable[str], *, ended_session: str | None = None) -> None:
    """Once the current transaction commits, tell the sockets of ``groups`` that their grant
    may have ended (they check it), or, with ``ended_session``, that this session ended (its
    sockets close). Failures are logged: the sockets' periodic check is the fallback."""
    message: dict[str, Any] = {"type": ACCESS_CHANGED}
    if ended_session:
        message["session"] = session_digest(ended_session)
    names = list(dict.fromkeys(groups))

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        for name in names:
            try:
                async_to_sync(layer.group_send)(name, message)
            except Exception:
                logger.exception("telling the sockets of %s that their access changed", name)

    if names:
        transaction.on_commit(send)


@receiver(post_save, sender=ApiKey, dispatch_uid="socket_access_key_saved")
def _key_saved(sender: Any, instance: ApiKey, created: bool, **kwargs: Any) -> None:
    if not created:
        announce_on_commit([key_group(instance.pk)])


@receiver(post_delete, sender=ApiKey, dispatch_uid="socket_access_key_deleted")
def _key_deleted(sender: Any, instance: ApiKey, **kwargs: Any) -> None:
    announce_on_commit([key_group(instance.pk)])


@receiver(post_save, sender=Tenant, dispatch_uid="socket_access_tenant_saved")
def _tenant_saved(sender: Any, instance: Tenant, created: bool, **kwargs: Any) -> None:
    # A deactivated tenant's sockets and event streams end as soon as the change commits.
    if not created and not instance.is_active:
        announce_on_commit([tenant_group(instance.pk)])


@receiver(post_save, sender=Membership, dispatch_uid="socket_access_membership_saved")
def _membership_saved(sender: Any, instance: Membership, created: bool, **kwargs: Any) -> None:
    if not created:
        announce_on_commit([user_group(instance.user_id)])


@receiver(post_delete, sender=Membership, dispatch_uid="socket_access_membership_deleted")
@receiver(post_delete, sender=Participant, dispatch_uid="socket_access_participant_deleted")
def _membership_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    announce_on_commit([user_group(instance.user_id)])


#: A user saved with only these fields changes nothing a socket's grant depends on.
_NEUTRAL_USER_FIELDS = frozenset({"last_login", "is_staff", "first_name", "last_name", "email"})


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="socket_access_user_saved")
def _user_saved(
    sender: Any, instance: Any, created: bool, update_fields: Any = None, **kwargs: Any
) -> None:
    # Deactivation and a new password (which ends the user's other sessions) come as saves
    # of the whole user or of these fields; logging in saves only last_login.
    if created or (update_fields is not None and set(update_fields) <= _NEUTRAL_USER_FIELDS):
        return
    announce_on_commit([user_group(instance.pk)])


@receiver(user_logged_out, dispatch_uid="socket_access_logged_out")
def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if user is not None and session_key:
        announce_on_commit([user_group(user.pk)], ended_session=session_key)
