"""Fixtures of the security tests: two tenants with one object of every kind, B's credentials,
a snapshot of everything tenant A owns (to prove an attack changed nothing), and the live
server (``tests/api/live_server.py``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import FieldDoesNotExist
from django.test import Client
from django.utils import timezone
from django.utils.http import urlsafe_base64_encode
from rest_framework.test import APIClient

from chatplatform.invitations import invitation_create
from chatplatform.models import (
    AuditAction,
    AuditEvent,
    ContextPolicy,
    IdentityProvider,
    Membership,
    MembershipRole,
    ModelProfile,
    Tenant,
    Transfer,
)
from chatplatform.models.conversations import Participant, TurnRecord
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from chats.services.messages import message_create
from chats.services.openai_responses import openai_response_create
from memory.services import fact_save
from summaries.models import TokenBackfillState
from tests.api.helpers import add_summary, add_turn
from tests.api.live_server import in_process_server  # noqa: F401  (the live server's fixture)
from tests.factories import make_admin, make_member, make_tenant, offline_profile, png_image

#: Every string of tenant A's data carries it: no answer to tenant B may contain it.
MARKER = "alphasecret"
#: Base of ids that exist nowhere (each world key gets its own, so they can be told apart).
MISSING_BASE = 987_650_000


@dataclass
class World:
    """Ids (and a few strings) of one tenant's objects, by kind."""

    ids: dict[str, Any]
    tenant: Tenant
    users: list[Any] = field(default_factory=list)

    def __getitem__(self, key: str) -> Any:
        return self.ids[key]


@dataclass
class Attack:
    """Tenant A's world, its "missing" twin, and tenant B's credentials."""

    a: World
    missing: World
    b: World
    admin_b: Any
    member_b: Any
    key_b: str  # an admin-role key of tenant B: the strongest credential short of A's
    member_key_b: str

    def session(self, user: Any | None = None) -> Client:
        client = Client()
        client.force_login(user or self.admin_b)
        return client

    def api_session(self, user: Any | None = None) -> APIClient:
        client = APIClient()
        client.force_login(user or self.admin_b)
        return client

    def api_key(self, raw: str | None = None) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw or self.key_b}")
        return client


def build_world(tenant: Tenant, admin: Any, member: Any, label: str) -> World:
    """One object of every tenant-owned kind in ``tenant`` (strings carry ``label``)."""
    conversation = conversation_create(
        tenant=tenant, created_by=admin, title=f"{label} plans", participants=[member]
    )
    record = add_turn(conversation, admin)
    user_message = record.user_message
    assert user_message is not None
    reply, _ = message_create(
        conversation=conversation,
        role="assistant",
        content=f"{label} reply",
        answers=user_message,
        validate=False,
    )
    second, _ = message_create(
        conversation=conversation,
        role="user",
        content=f"{label} message",
        author=admin,
        image=png_image(),
    )
    summary = add_summary(conversation, user_message, second)
    fact = fact_save(tenant, admin, f"{label} likes tea", key=f"{label}-color")
    key, _raw = api_key_create(tenant=tenant, name=f"{label} key", user=admin)
    invitation, _link = invitation_create(
        tenant=tenant, invited_by=admin, base_url="http://testserver/", email=f"{label}@example.com"
    )
    response = openai_response_create(
        conversation,
        admin,
        user_message_id=user_message.pk,
        model=f"{label} model",
        created_at=timezone.now(),
        stored=True,
    )
    with tenant_scope(tenant):
        TurnRecord.objects.filter(pk=record.pk).update(assistant_message=reply)
        profile = ModelProfile.objects.create(
            tenant=tenant,
            name=f"{label} model",
            provider="offline",
            model=f"{label}-m",
            context_window=8000,
            max_output_tokens=1000,
        )
        policy = ContextPolicy.objects.create(
            tenant=tenant,
            name=f"{label} policy",
            model_profile=offline_profile(),
            max_context_tokens=32000,
        )
        backfill = TokenBackfillState.objects.create(tenant=tenant, signature=f"{label}-sig")
        membership = Membership.objects.get(user=member)
        participant = Participant.objects.get(conversation=conversation, user=member)
        audit = AuditEvent.objects.create(
            tenant=tenant, action=AuditAction.CHANGED, target_label=f"{label} policy"
        )
        identity_provider = IdentityProvider.objects.create(
            tenant=tenant,
            issuer=f"https://login.{label.lower()}.example",
            client_id=f"{label}-client",
            email_domains=f"{label.lower()}.example",
        )
        transfer = Transfer.objects.create(
            tenant=tenant,
            user=member,
            kind="export",
            format="claude",
            status="done",
            file=f"t{tenant.pk}/exports/{label}.json",
            expires_at=timezone.now() + timedelta(hours=1),
        )
    return World(
        ids={
            "tenant": tenant.pk,
            "conversation": conversation.pk,
            "message": user_message.pk,
            "reply": reply.pk,
            "message2": second.pk,
            "turnrecord": record.pk,
            "response": response.public_id,
            "summary": summary.pk,
            "fact": fact.pk,
            "fact_key": f"{label}-color",
            "apikey": key.pk,
            "invitation": invitation.pk,
            "profile": profile.pk,
            "policy": policy.pk,
            "backfill": backfill.pk,
            "membership": membership.pk,
            "participant": participant.pk,
            "audit": audit.pk,
            "identity_provider": identity_provider.pk,
            "transfer": transfer.pk,
            "user": member.pk,
            "admin_user": admin.pk,
            "username": member.username,
            "uidb64": urlsafe_base64_encode(str(member.pk).encode()),
        },
        tenant=tenant,
        users=[admin, member],
    )


def missing_twin(world: World) -> World:
    """The same keys, naming objects that exist nowhere."""
    ids: dict[str, Any] = {}
    for n, (name, value) in enumerate(sorted(world.ids.items())):
        if name.startswith("ct:"):
            ids[name] = value  # content types are real in both
        elif isinstance(value, int):
            ids[name] = MISSING_BASE + n
        elif name == "uidb64":
            ids[name] = urlsafe_base64_encode(str(MISSING_BASE + n).encode())
        else:
            ids[name] = f"nosuch-{name.replace('_', '-')}"
    return World(ids=ids, tenant=world.tenant)


def global_objects() -> dict[str, int]:
    """Rows that belong to no tenant but are registered in the admin (tenant admins must not
    reach them either)."""
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    interval = IntervalSchedule.objects.create(every=7, period="days")
    seen = {
        "user_agent": "ua",
        "ip_address": "192.0.2.7",
        "username": "someone",
        "http_accept": "*/*",
    }
    return {
        "accessattempt": AccessAttempt.objects.create(**seen, failures_since_start=1).pk,
        "accesslog": AccessLog.objects.create(**seen).pk,
        "accessfailurelog": AccessFailureLog.objects.create(**seen).pk,
        "group": Group.objects.create(name="global group").pk,
        "intervalschedule": interval.pk,
        "crontabschedule": CrontabSchedule.objects.create(minute="7").pk,
        "solarschedule": SolarSchedule.objects.create(event="sunrise", latitude=1, longitude=1).pk,
        "clockedschedule": ClockedSchedule.objects.create(
            clocked_time=timezone.now() + dt.timedelta(days=1)
        ).pk,
        "periodictask": PeriodicTask.objects.create(
            name="global task", task="summaries.tasks.refresh_rolling_summary", interval=interval
        ).pk,
    }


def distinctive_ids(base: int = 7_100_000) -> None:
    """Make every table's next id large and unique to that table, so an id in an answer
    can be told from any other number (and from another table's id)."""
    from django.db import connection
    from django_celery_beat import models as beat

    models = [m for m in apps.get_models() if _has_tenant(m)]
    models += [Tenant, get_user_model(), Group, beat.PeriodicTask, beat.IntervalSchedule]
    models += [beat.CrontabSchedule, beat.SolarSchedule, beat.ClockedSchedule]
    with connection.cursor() as cursor:
        for n, model in enumerate(models):
            table, start = connection.ops.quote_name(model._meta.db_table), base + n * 10_000
            if connection.vendor == "postgresql":
                highest = f"SELECT COALESCE(MAX(id), 0) FROM {table}"  # noqa: S608
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence(%s, 'id'), GREATEST(%s, ({highest})))",
                    [model._meta.db_table, start],
                )
            else:
                name = model._meta.db_table
                cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [name])
                highest = f"SELECT COALESCE(MAX(id), 0) FROM {table}"  # noqa: S608
                cursor.execute(
                    f"INSERT INTO sqlite_sequence (name, seq) SELECT %s, MAX(%s, ({highest}))",
                    [name, start],
                )


@pytest.fixture
def attack(presets) -> Attack:
    distinctive_ids()
    tenant_a = make_tenant(f"{MARKER} Corp")
    admin_a = make_admin(tenant_a, username=f"{MARKER}-admin", first_name=MARKER.title())
    member_a = make_member(tenant_a, username=f"{MARKER}-member", first_name=MARKER.title())
    a = build_world(tenant_a, admin_a, member_a, MARKER)
    a.ids.update(global_objects())
    a.ids.update({f"ct:{ct.app_label}.{ct.model}": ct.pk for ct in ContentType.objects.all()})
    tenant_b = make_tenant("Beta Corp")
    admin_b = make_admin(tenant_b, username="beta-admin")
    member_b = make_member(tenant_b, username="beta-member")
    b = build_world(tenant_b, admin_b, member_b, "beta")
    _, key_b = api_key_create(
        tenant=tenant_b, name="b admin", user=admin_b, role=MembershipRole.ADMIN
    )
    _, member_key_b = api_key_create(tenant=tenant_b, name="b member", user=member_b)
    return Attack(
        a=a,
        missing=missing_twin(a),
        b=b,
        admin_b=admin_b,
        member_b=member_b,
        key_b=key_b,
        member_key_b=member_key_b,
    )


def _has_tenant(model: Any) -> bool:
    try:
        model._meta.get_field("tenant")
    except FieldDoesNotExist:
        return False
    return True


def snapshot(world: World) -> dict[str, Any]:
    """Every row tenant A owns (all tenant-owned models, their tenant, their users, and the
    global rows the admin shows), with every column."""
    data: dict[str, Any] = {}
    with all_tenants():
        for model in apps.get_models():
            if _has_tenant(model):
                data[model._meta.label] = list(
                    model._base_manager.filter(tenant_id=world.tenant.pk).order_by("pk").values()
                )
        data["tenant"] = list(Tenant.objects.filter(pk=world.tenant.pk).values())
        data["users"] = list(
            get_user_model()
            .objects.filter(pk__in=[u.pk for u in world.users])
            .order_by("pk")
            .values()
        )
        data["groups"] = list(Group.objects.order_by("pk").values())
        from django_celery_beat.models import PeriodicTask

        data["periodic"] = list(PeriodicTask.objects.order_by("pk").values())
    # Every kind is present, so "unchanged" means something.
    for label in (
        "chatplatform.Conversation",
        "chatplatform.Message",
        "memory.UserFact",
        "chatplatform.TurnRecord",
    ):
        assert data[label], label
    return data
