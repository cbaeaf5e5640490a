"""The cross-tenant route matrix: every HTTP route of the site (walked from the URL resolver:
API, UI, admin, accounts) and every WebSocket route, with an explicit case saying how to fill
its URL kwargs (and bodies, query strings) from tenant A's objects.

A route without a case fails the guard test: add one to ``HTTP_CASES`` (or to
``ADMIN_OBJECTS`` / ``ADMIN_ACTIONS`` for a new admin model or admin view, or ``WS_CASES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver

from tests.security.conftest import MARKER, World

# A case's callables get (target, own): ``target`` is tenant A's world or its missing twin,
# ``own`` is tenant B's world (the attacker's own objects, the same in both runs).
Fill = Callable[[World, World], Any]


@dataclass(frozen=True)
class Case:
    """How to call one route. ``kwargs``: URL kwargs; ``body``: method -> body; ``query``:
    the query string; ``methods``: override (default: every method the view implements,
    GET and POST for function views and the admin); ``path``: a literal path (unnamed
    patterns that cannot be filled); ``public``: not tenant data (login, schema...), still
    checked for A's marker and for changing nothing."""

    kwargs: Fill | None = None
    body: dict[str, Fill] = field(default_factory=dict)
    query: Fill | None = None
    methods: tuple[str, ...] | None = None
    path: Fill | None = None
    public: bool = False
    note: str = ""


def download_link_token(tenant_id: Any, transfer_id: Any) -> str:
    """A signed download link's token naming that tenant's export (as the Account page
    gives its owner)."""
    from django.core import signing

    from chats.transfer.files import SALT

    return signing.dumps({"t": tenant_id, "x": transfer_id}, salt=SALT, compress=True)


def conv(t: World, own: World) -> dict[str, Any]:
    return {"conversation_id": t["conversation"]}


def own_conv(t: World, own: World) -> dict[str, Any]:
    return {"conversation_id": own["conversation"]}


def conv_msg(t: World, own: World) -> dict[str, Any]:
    return {"conversation_id": t["conversation"], "message_id": t["message"]}


def own_conv_their_msg(t: World, own: World) -> dict[str, Any]:
    return {"conversation_id": own["conversation"], "message_id": t["message"]}


def conv_image(t: World, own: World) -> dict[str, Any]:
    """A's message with an image, in A's conversation."""
    return {"conversation_id": t["conversation"], "message_id": t["message2"]}


def own_conv_their_image(t: World, own: World) -> dict[str, Any]:
    return {"conversation_id": own["conversation"], "message_id": t["message2"]}


def fact(t: World, own: World) -> dict[str, Any]:
    return {"fact_id": t["fact"]}


def none(t: World, own: World) -> dict[str, Any]:
    return {}


def const(value: Any) -> Fill:
    return lambda t, own: value


PUBLIC = [Case(public=True)]

#: Route name (namespace:name) -> its cases. Admin model routes come from ADMIN_OBJECTS.
HTTP_CASES: dict[str, list[Case]] = {
    # --- site and accounts: not tenant data, but must not leak or change A's ---------------
    "home": [Case()],
    "healthz": PUBLIC,
    "favicon": PUBLIC,
    "login": [Case(public=True, body={"post": const({"username": f"{MARKER}-member"})})],
    "logout": PUBLIC,
    "password_change": PUBLIC,
    "password_change_done": PUBLIC,
    "password_reset": PUBLIC,
    "password_reset_done": PUBLIC,
    "password_reset_confirm": [
        Case(kwargs=lambda t, own: {"uidb64": t["uidb64"], "token": "set-password"})
    ],
    "password_reset_complete": PUBLIC,
    # The token is the invitation's only credential (a holder of A's link is invited by
    # design); a token that names no invitation gets the page of an unknown link.
    "invitation_accept": [
        Case(public=True, kwargs=const({"token": "nosuch-invitation"}), note="token is the key")
    ],
    # Single sign-on starts per tenant by design (the tenant's slug is its public address);
    # a slug or a domain that names no provider gets the page of one without single sign-on.
    "sso_by_email": [
        Case(
            public=True, methods=("post",), body={"post": const({"sso_email": "x@nowhere.example"})}
        )
    ],
    "sso_start": [Case(public=True, kwargs=const({"slug": "nosuch-tenant"}), note="public")],
    "sso_callback": [Case(public=True, kwargs=const({"slug": "nosuch-tenant"}), note="public")],
    # --- the REST API --------------------------------------------------------------------
    "api:root": PUBLIC,
    "api:schema": PUBLIC,
    "api:docs": PUBLIC,
    "api:me": [Case()],
    "api:exports": [Case(body={"post": const({"format": "nosuch"})})],
    "api:export": [Case(kwargs=lambda t, own: {"export_id": t["transfer"]})],
    "api:export-download": [Case(kwargs=lambda t, own: {"export_id": t["transfer"]})],
    "api:conversations": [
        Case(query=const("q=a")),
        Case(
            methods=("post",),
            body={"post": lambda t, own: {"title": "x", "continues": t["conversation"]}},
        ),
        Case(
            methods=("post",),
            body={"post": lambda t, own: {"title": "x", "participants": [t["username"]]}},
        ),
    ],
    "api:conversation": [Case(kwargs=conv, body={"patch": const({"title": "taken"})})],
    "api:archive": [Case(kwargs=conv)],
    "api:leave": [Case(kwargs=conv)],
    "api:messages": [
        Case(kwargs=conv, body={"post": const({"content": "hi", "client_id": "x1"})}),
        Case(
            kwargs=own_conv,
            methods=("post",),
            body={"post": lambda t, own: {"content": "quote", "reply_to": t["message"]}},
        ),
    ],
    "api:message": [Case(kwargs=conv_msg), Case(kwargs=own_conv_their_msg)],
    "api:message-image": [Case(kwargs=conv_image), Case(kwargs=own_conv_their_image)],
    "api:turn-record": [Case(kwargs=conv_msg), Case(kwargs=own_conv_their_msg)],
    "api:message-regenerate": [Case(kwargs=conv_msg), Case(kwargs=own_conv_their_msg)],
    "api:message-versions": [Case(kwargs=conv_msg), Case(kwargs=own_conv_their_msg)],
    "api:message-edit": [
        Case(kwargs=conv_msg, body={"post": const({"content": "taken"})}),
        Case(kwargs=own_conv_their_msg, body={"post": const({"content": "taken"})}),
    ],
    "api:context-preview": [
        Case(kwargs=conv),
        Case(kwargs=own_conv, query=lambda t, own: f"policy={t['policy']}"),
    ],
    "api:summaries": [Case(kwargs=conv)],
    "api:summaries-refresh": [Case(kwargs=conv)],
    "api:facts": [
        Case(),
        Case(query=lambda t, own: f"user={t['username']}", body={"post": const({"text": "x"})}),
    ],
    "api:fact": [Case(kwargs=fact, body={"patch": const({"text": "taken"})})],
    "api:fact-by-key": [
        # (Keys are per user: a key A uses names nothing of A's for B, so only ?user= counts.)
        Case(
            kwargs=const({"key": "color"}),
            query=lambda t, own: f"user={t['username']}",
            body={"put": const({"text": "red"})},
        ),
    ],
    "api:usage": [Case()],
    "api:policy": [Case()],
    "api:model-profiles": [Case()],
    "api:model-profile": [Case(kwargs=lambda t, own: {"profile_id": t["profile"]})],
    "api:not-found": [
        Case(path=lambda t, own: f"/api/v1/conversations/{t['conversation']}/nothing/")
    ],
    # --- the SDK-compatible API (keys only: B's session is refused) --------------------------
    "compat-openai-chat": [
        Case(
            methods=("post",),
            body={
                "post": lambda t, own: {
                    "model": "m",
                    "messages": [{"role": "user", "content": "hi"}],
                    "metadata": {"conversation_id": str(t["conversation"])},
                }
            },
        )
    ],
    "compat-openai-models": [Case()],
    "compat-openai-responses": [
        Case(
            methods=("post",),
            body={
                "post": lambda t, own: {
                    "model": "m",
                    "input": "hi",
                    "previous_response_id": t["response"],
                }
            },
        )
    ],
    "compat-openai-response": [Case(kwargs=lambda t, own: {"response_id": t["response"]})],
    "compat/openai/v1/^.*$": [
        Case(path=lambda t, own: f"/compat/openai/v1/conversations/{t['conversation']}")
    ],
    # (The Anthropic protocol names a conversation only in a header, which the matrix does not
    # send; a send would start B's own, which this test's transaction cannot show a reply
    # runner: the body is refused before anything is stored. The SDK tests send A's id.)
    "compat-anthropic-messages": [
        Case(
            methods=("post",),
            body={
                "post": const(
                    {
                        "model": "m",
                        "max_tokens": 16,
                        "messages": [{"role": "assistant", "content": "x"}],
                    }
                )
            },
            note="named conversations: tests/api/compat/test_anthropic_sdk.py",
        )
    ],
    "compat-anthropic-count-tokens": [
        Case(
            methods=("post",),
            body={"post": const({"model": "m", "messages": [{"role": "user", "content": "x"}]})},
        )
    ],
    "compat/anthropic/v1/^.*$": [
        Case(path=lambda t, own: f"/compat/anthropic/v1/conversations/{t['conversation']}")
    ],
    # --- the web UI ------------------------------------------------------------------------
    "chats_ui:tenant_switch": [
        Case(methods=("post",), body={"post": lambda t, own: {"tenant_id": t["tenant"]}})
    ],
    "chats_ui:conversation_list": [Case(query=const("q=a"))],
    "chats_ui:account": [Case()],
    "chats_ui:account_import": [Case(body={"post": const({"format": "chatgpt"})})],
    "chats_ui:account_export": [Case(body={"post": const({"format": "nosuch"})})],
    "chats_ui:account_delete": [
        Case(body={"post": const({"password": "wrong", "confirm": "wrong"})})
    ],
    "chats_ui:transfer_download": [
        Case(kwargs=lambda t, own: {"token": download_link_token(t["tenant"], t["transfer"])})
    ],
    "chats_ui:conversation_new": [
        Case(
            body={
                "post": lambda t, own: {
                    "title": "x",
                    "continues": t["conversation"],
                    "participants": [t["user"]],
                }
            }
        )
    ],
    "chats_ui:conversation_detail": [Case(kwargs=conv)],
    "chats_ui:conversation_start": [Case()],
    "chats_ui:conversation_rename": [Case(kwargs=conv, body={"post": const({"title": "taken"})})],
    "chats_ui:conversation_archive": [Case(kwargs=conv)],
    "chats_ui:conversation_unarchive": [Case(kwargs=conv)],
    "chats_ui:conversation_delete": [Case(kwargs=conv)],
    "chats_ui:conversation_leave": [Case(kwargs=conv)],
    "chats_ui:participant_add": [
        Case(kwargs=conv, body={"post": lambda t, own: {"user": own["user"]}}),
        Case(kwargs=own_conv, body={"post": lambda t, own: {"user": t["user"]}}),
    ],
    "chats_ui:turn_meter": [
        Case(kwargs=conv),
        Case(kwargs=own_conv, query=lambda t, own: f"message={t['message']}"),
    ],
    "chats_ui:conversation_summaries": [Case(kwargs=conv)],
    "chats_ui:message_image": [Case(kwargs=conv_image), Case(kwargs=own_conv_their_image)],
    "chats_ui:message_fit": [Case(kwargs=conv, body={"post": const({"text": "their draft"})})],
    "chats_ui:message_versions": [Case(kwargs=conv_msg), Case(kwargs=own_conv_their_msg)],
    "chats_ui:memory_list": [Case()],
    "chats_ui:memory_add": [Case(body={"post": const({"text": "mine"})})],
    "chats_ui:memory_edit": [Case(kwargs=fact, body={"post": const({"text": "taken"})})],
    "chats_ui:memory_delete": [Case(kwargs=fact)],
    "chats_ui:memory_share": [Case(kwargs=fact, body={"post": const({"shareable": "on"})})],
    "chats_ui:memory_history": [Case(kwargs=fact)],
    # --- the admin: site views and custom views ------------------------------------------------
    "admin:index": [Case()],
    "admin:login": PUBLIC,
    "admin:logout": PUBLIC,
    "admin:password_change": PUBLIC,
    "admin:password_change_done": PUBLIC,
    "admin:jsi18n": PUBLIC,
    "admin:autocomplete": [
        Case(query=const("app_label=summaries&model_name=summary&field_name=conversation&term=a"))
    ],
    "admin:view_on_site": [
        Case(
            kwargs=lambda t, own: {
                "content_type_id": t["ct:chatplatform.conversation"],
                "object_id": t["conversation"],
            }
        )
    ],
    "admin:app_list": [Case(kwargs=const({"app_label": "chatplatform"}))],
    "admin/(?P<url>.*)$": [
        Case(path=lambda t, own: f"/admin/chatplatform/conversation/{t['conversation']}/change")
    ],
    "admin:chatplatform_contextpolicy_preview": [
        Case(
            kwargs=lambda t, own: {"object_id": t["policy"]},
            query=lambda t, own: f"conversation={own['conversation']}",
        ),
        Case(
            kwargs=lambda t, own: {"object_id": own["policy"]},
            query=lambda t, own: f"conversation={t['conversation']}",
        ),
        Case(
            kwargs=lambda t, own: {"object_id": own["policy"]},
            query=lambda t, own: f"conversation={own['conversation']}&user={t['user']}",
        ),
    ],
    "admin:chatplatform_contextpolicy_copy": [
        Case(kwargs=lambda t, own: {"object_id": t["policy"]}),
        Case(
            kwargs=lambda t, own: {"object_id": own["policy"]},
            body={"post": lambda t, own: {"copy_tenant": t["tenant"]}},
        ),
    ],
    "admin:chatplatform_contextpolicy_activate": [
        Case(kwargs=lambda t, own: {"object_id": t["policy"]})
    ],
    "admin:chatplatform_tenant_usage_index": [Case()],
    "admin:chatplatform_tenant_jobs": [Case()],
    "admin:chatplatform_tenant_usage": [Case(kwargs=lambda t, own: {"object_id": t["tenant"]})],
    "admin:chatplatform_tenant_exports": [
        Case(
            kwargs=lambda t, own: {"object_id": t["tenant"]},
            body={"post": const({"format": "claude"})},
        )
    ],
    "admin:auth_user_password_change": [
        Case(
            kwargs=lambda t, own: {"id": t["user"]},
            body={"post": const({"password1": "x-Y-z-12345", "password2": "x-Y-z-12345"})},
        )
    ],
}

#: Every model registered in the admin -> the world key of tenant A's object of that model
#: (global models: a row that exists, which tenant admins must not reach either).
ADMIN_OBJECTS: dict[str, str] = {
    "auth.group": "group",
    "auth.user": "user",
    "django_celery_beat.periodictask": "periodictask",
    "django_celery_beat.clockedschedule": "clockedschedule",
    "django_celery_beat.crontabschedule": "crontabschedule",
    "django_celery_beat.solarschedule": "solarschedule",
    "django_celery_beat.intervalschedule": "intervalschedule",
    "axes.accessattempt": "accessattempt",
    "axes.accesslog": "accesslog",
    "axes.accessfailurelog": "accessfailurelog",
    "chatplatform.contextpolicy": "policy",
    "chatplatform.tenant": "tenant",
    "chatplatform.membership": "membership",
    "chatplatform.apikey": "apikey",
    "chatplatform.invitation": "invitation",
    "chatplatform.modelprofile": "profile",
    "chatplatform.conversation": "conversation",
    "chatplatform.message": "message",
    "chatplatform.turnrecord": "turnrecord",
    "chatplatform.auditevent": "audit",
    "chatplatform.identityprovider": "identity_provider",
    "memory.userfact": "fact",
    "summaries.summary": "summary",
    "summaries.tokenbackfillstate": "backfill",
}

#: The standard admin views of a model: name suffix -> (uses an object id, bodies by method).
ADMIN_ACTIONS: dict[str, tuple[bool, dict[str, str]]] = {
    "changelist": (False, {"get": "search", "post": "bulk_delete"}),
    "add": (False, {"get": "", "post": "foreign_keys"}),
    "history": (True, {"get": ""}),
    "delete": (True, {"get": "", "post": "confirm"}),
    "change": (True, {"get": "", "post": "empty"}),
    "object": (True, {"get": ""}),  # <id>/ redirects to <id>/change/
}


@dataclass(frozen=True)
class Route:
    key: str  # "namespace:name", or the route pattern for unnamed ones
    route: str  # the full route pattern
    callback: Any

    @property
    def area(self) -> str:
        if self.route.startswith(("api/", "compat/")):
            return "api"
        if self.route.startswith("admin/"):
            return "admin"
        return "site"

    def default_methods(self) -> tuple[str, ...]:
        cls = getattr(self.callback, "cls", None)  # a DRF view
        if cls is not None:
            methods = ("get", "post", "put", "patch", "delete")
            return tuple(m for m in methods if hasattr(cls, m))
        return ("get", "post")


ADMIN_MODEL_ROUTE = re.compile(r"^admin/(?P<app>\w+)/(?P<model>\w+)/<path:object_id>/$")


def walk(patterns: list[Any], prefix: str = "", namespace: str | None = None) -> Iterator[Route]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace
            joined = f"{namespace}:{ns}" if namespace and ns else ns or namespace
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), joined)
        elif isinstance(pattern, URLPattern):
            route = prefix + str(pattern.pattern)
            if pattern.name:
                key = f"{namespace}:{pattern.name}" if namespace else pattern.name
            else:
                match = ADMIN_MODEL_ROUTE.match(route)
                key = f"admin:{match['app']}_{match['model']}_object" if match else route
            yield Route(key, route, pattern.callback)


def http_routes() -> list[Route]:
    return list(walk(get_resolver().url_patterns))


def admin_model_cases() -> dict[str, tuple[str, str, bool, dict[str, str]]]:
    """``admin:<app>_<model>_<action>`` -> (model label, world key, uses id, bodies)."""
    cases = {}
    for model in admin.site._registry:
        label = model._meta.label_lower
        base = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        for action, (uses_id, bodies) in ADMIN_ACTIONS.items():
            if label in ADMIN_OBJECTS:
                cases[f"{base}_{action}"] = (label, ADMIN_OBJECTS[label], uses_id, bodies)
    return cases


def unknown_routes() -> list[str]:
    admin_cases = admin_model_cases()
    return sorted(
        r.key for r in http_routes() if r.key not in HTTP_CASES and r.key not in admin_cases
    )


_PARAM = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def fill(route: str, kwargs: dict[str, Any]) -> str:
    """The path of ``route`` with its parameters replaced by ``kwargs``."""

    def value(match: re.Match[str]) -> str:
        return str(kwargs[match.group(1) or match.group(2)])

    return "/" + _PARAM.sub(value, route).replace("^", "").replace("$", "")
