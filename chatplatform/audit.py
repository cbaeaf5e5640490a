"""Writing the audit log (:class:`~chatplatform.models.AuditEvent`): one call per change or
security event, inside the change's own transaction (a change rolled back leaves no entry).

Values are recorded as people read them (a related object by its name, dates in ISO 8601);
a field whose name says it holds a secret is recorded only as changed."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import models
from django.http import HttpRequest

from chatplatform.client_address import client_ip
from chatplatform.models import AuditAction, AuditEvent
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

#: A field whose name holds one of these is a secret: its values never enter the log.
SECRET_WORDS = ("password", "secret", "key_hash", "api_key", "token", "ciphertext")
SECRET_SHOWN = "(changed)"  # noqa: S105  (the mask, not a secret)


def is_secret(field: str) -> bool:
    return any(word in field.lower() for word in SECRET_WORDS)


def plain(value: Any) -> Any:
    """``value`` as the log keeps it (JSON)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, models.Model):
        return str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Iterable) and not isinstance(value, bytes):
        return [plain(v) for v in value]
    return str(value)


def field_changes(
    fields: Iterable[str], before: Mapping[str, Any], after: Mapping[str, Any]
) -> dict[str, list[Any]]:
    """``{field: [before, after]}`` of ``fields``, secrets masked."""
    changes: dict[str, list[Any]] = {}
    for field in fields:
        if is_secret(field):
            changes[field] = [SECRET_SHOWN, SECRET_SHOWN]
        else:
            changes[field] = [plain(before.get(field)), plain(after.get(field))]
    return changes


def audit_record(
    action: AuditAction,
    *,
    request: HttpRequest | None = None,
    actor: Any = None,
    actor_label: str = "",
    tenant_id: int | None = None,
    target: models.Model | None = None,
    changes: Mapping[str, Any] | None = None,
    address: str | None = None,
) -> AuditEvent:
    """Record one event; ``actor`` defaults to the request's user, the address and browser
    are the request's (or ``address``), ``tenant_id`` defaults to the target's tenant."""
    user = getattr(request, "user", None)
    if actor is None and user is not None and user.is_authenticated:
        actor = user
    if tenant_id is None and target is not None:
        tenant_id = getattr(target, "tenant_id", None)
        if tenant_id is None and target._meta.label == "chatplatform.Tenant":
            tenant_id = target.pk
    with tenant_scope(tenant_id) if tenant_id is not None else all_tenants():
        return AuditEvent.objects.create(
            tenant_id=tenant_id,
            actor=actor,
            actor_label=(actor_label or (actor.get_username() if actor is not None else ""))[:150],
            action=action,
            target_type=target._meta.label_lower if target is not None else "",
            target_id=str(target.pk) if target is not None and target.pk is not None else "",
            target_label=str(target)[:200] if target is not None else "",
            changes=dict(changes or {}),
            ip_address=client_ip(request) if request is not None else address,
            user_agent=(request.headers.get("User-Agent", "") if request is not None else "")[:300],
        )


def _login_failed(sender: Any, credentials: Any = None, request: Any = None, **kwargs: Any) -> None:
    username = (credentials or {}).get("username") if isinstance(credentials, dict) else None
    audit_record(AuditAction.LOGIN_FAILED, request=request, actor_label=str(username or ""))


def _locked_out(sender: Any, request: Any = None, username: Any = None, **kwargs: Any) -> None:
    audit_record(AuditAction.LOCKED_OUT, request=request, actor_label=str(username or ""))


def security_events_connect() -> None:
    """Record the log-in pages' security events: every failed log-in (Django's signal) and
    every lock-out (django-axes'), with the username tried and the client's address."""
    from axes.signals import user_locked_out
    from django.contrib.auth.signals import user_login_failed

    user_login_failed.connect(_login_failed, dispatch_uid="audit_login_failed")
    user_locked_out.connect(_locked_out, dispatch_uid="audit_locked_out")


def endpoint_refused_record(*, tenant_id: int | None, profile: models.Model, reason: str) -> None:
    """A call to a tenant's own model endpoint refused by the operator's rules (a host that
    now resolves to a private address, say): a security event of the tenant."""
    audit_record(
        AuditAction.ENDPOINT_REFUSED,
        tenant_id=tenant_id,
        target=profile,
        changes={
            "endpoint": [None, str(getattr(profile, "base_url", ""))],
            "reason": [None, reason],
        },
    )
