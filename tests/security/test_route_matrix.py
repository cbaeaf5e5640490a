"""Tenant B attacks every route of the site with tenant A's ids.

The routes are walked from the URL resolver (API, UI, admin, accounts); ``matrix.py`` holds
one explicit case per route name. Tenant B's admin (browser session) and tenant B's admin API
key try GET and every write method a route implements with A's ids, and the same request
with ids that exist nowhere. Each attempt must answer exactly as for the missing object (same
status, same redirect, same body up to the ids and CSRF tokens; JSON bodies compared as JSON),
never show A's data, and change nothing of A's (every row A owns, before and after).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import pytest
from django.apps import apps
from django.test import Client
from rest_framework.test import APIClient

from tests.security import answers, matrix
from tests.security.conftest import MARKER, Attack, World, snapshot

pytestmark = pytest.mark.django_db


def test_every_route_has_a_case():
    unknown = matrix.unknown_routes()
    assert not unknown, (
        "Routes without a cross-tenant case: "
        + ", ".join(unknown)
        + ". Add a case for each to tests/security/matrix.py (HTTP_CASES, or ADMIN_OBJECTS "
        "for a newly registered admin model) saying how to fill its kwargs with tenant A's "
        "objects."
    )


def test_every_admin_model_has_an_object():
    from django.contrib import admin

    registered = {model._meta.label_lower for model in admin.site._registry}
    missing = sorted(registered - set(matrix.ADMIN_OBJECTS))
    assert not missing, f"Add these admin models to matrix.ADMIN_OBJECTS: {missing}"


def test_the_matrix_has_no_stale_cases():
    known = {r.key for r in matrix.http_routes()}
    stale = sorted(set(matrix.HTTP_CASES) - known)
    assert not stale, f"Cases for routes that no longer exist: {stale}"


# --- making requests ------------------------------------------------------------------------

Maker = Callable[[], Any]


def principals(attack: Attack, area: str) -> dict[str, Maker]:
    """Fresh clients per request (so one answer's flash messages never leak into the next)."""
    session = attack.session().cookies["sessionid"].value

    def browser() -> Client:
        client = Client()
        client.cookies["sessionid"] = session
        return client

    def api_session() -> APIClient:
        client = APIClient()
        client.cookies["sessionid"] = session
        return client

    if area == "api":
        return {"B session": api_session, "B admin key": lambda: attack.api_key()}
    return {"B session": browser}


def leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, str) and "=" in value:
        return [int(v) if v.isdigit() else v for _, v in parse_qsl(value)]
    return [value] if isinstance(value, (int, str)) else []


def send(client: Any, method: str, path: str, query: str, body: Any, area: str) -> Any:
    url = f"{path}?{query}" if query else path
    call = getattr(client, method)
    if body is None:
        return call(url)
    if area == "api":
        return call(url, body, format="json")
    if method == "post":
        return call(url, body)
    return call(url, body, content_type="application/json")


class Request:
    """One request of a case, for the target world (A's or the missing twin)."""

    def __init__(
        self,
        route: matrix.Route,
        method: str,
        *,
        kwargs: matrix.Fill | None = None,
        body: matrix.Fill | None = None,
        query: matrix.Fill | None = None,
        path: matrix.Fill | None = None,
    ) -> None:
        self.route, self.method = route, method
        self.kwargs, self.body, self.query, self.path = kwargs, body, query, path

    def parts(self, target: World, own: World) -> tuple[str, str, Any]:
        if self.path is not None:
            path = self.path(target, own)
        else:
            kwargs = self.kwargs(target, own) if self.kwargs else {}
            path = matrix.fill(self.route.route, kwargs)
        query = self.query(target, own) if self.query else ""
        body = self.body(target, own) if self.body else None
        return path, query, body

    def values(self, target: World, own: World) -> list[Any]:
        """Every value the request carries (URL kwargs, query, body)."""
        if self.path is not None:
            values: list[Any] = [int(n) for n in re.findall(r"\d+", self.path(target, own))]
        else:
            values = leaves(self.kwargs(target, own) if self.kwargs else {})
        query = self.query(target, own) if self.query else ""
        body = self.body(target, own) if self.body else None
        return values + leaves(query) + leaves(body)

    def references(self, attack: Attack) -> list[tuple[Any, Any]]:
        """(A's value, missing value) pairs of every id the request carries."""
        ours = self.values(attack.a, attack.b)
        missing = self.values(attack.missing, attack.b)
        return [(x, y) for x, y in zip(ours, missing, strict=True) if x != y]


def expand(attack: Attack, route: matrix.Route) -> list[Request]:
    """Every request of the route's cases."""
    out = []
    admin_cases = matrix.admin_model_cases()
    if route.key in admin_cases:
        label, key, uses_id, bodies = admin_cases[route.key]
        model = apps.get_model(label)
        for method, body_kind in bodies.items():
            out.append(
                Request(
                    route,
                    method,
                    kwargs=object_id(key) if uses_id else None,
                    body=admin_body(body_kind, model, key),
                    query=matrix.const("q=a") if body_kind == "search" else None,
                )
            )
        return out
    for case in matrix.HTTP_CASES[route.key]:
        for method in case.methods or route.default_methods():
            body = case.body.get(method)
            out.append(
                Request(
                    route, method, kwargs=case.kwargs, body=body, query=case.query, path=case.path
                )
            )
    return out


def object_id(key: str) -> matrix.Fill:
    return lambda t, own: {"object_id": t[key]}


def admin_body(kind: str, model: Any, key: str) -> matrix.Fill | None:
    if kind in ("", "search"):
        return None
    if kind == "empty":
        return matrix.const({})
    if kind == "confirm":
        return matrix.const({"post": "yes"})
    if kind == "bulk_delete":
        return lambda t, own: {
            "action": "delete_selected",
            "_selected_action": [t[key]],
            "post": "yes",
        }

    def foreign_keys(t: World, own: World) -> dict[str, Any]:
        """Every foreign key of the model's form pointing at A's objects, the tenant at B's
        own (the form must refuse them as it refuses ids that exist nowhere)."""
        data: dict[str, Any] = {}
        for f in model._meta.get_fields():
            if not (getattr(f, "concrete", False) and f.is_relation and f.editable):
                continue
            related = matrix.ADMIN_OBJECTS.get(f.related_model._meta.label_lower)
            if related is None:
                continue
            value = t[related]
            if related == "tenant":
                value = own["tenant"]
            data[f.name] = [value] if f.many_to_many else value
        return data

    return foreign_keys


# --- the matrix ---------------------------------------------------------------------------


def run_area(attack: Attack, area: str, part: int = 0, parts: int = 1) -> tuple[int, list[str]]:
    """Attack the routes of ``area``; with ``parts`` > 1, only every ``parts``-th of them from
    the ``part``-th (so the parts of a large area can run in parallel)."""
    failures: list[str] = []
    count = 0
    known = {*matrix.HTTP_CASES, *matrix.admin_model_cases()}
    routes = [r for r in matrix.http_routes() if r.area == area and r.key in known]
    for route in routes[part::parts]:
        for request in expand(attack, route):
            for who, make in principals(attack, area).items():
                count += 1
                failures.extend(attempt(attack, route, request, who, make, area))
    return count, failures


def attempt(
    attack: Attack, route: matrix.Route, request: Request, who: str, make: Maker, area: str
) -> list[str]:
    label = f"{route.key} {request.method.upper()} as {who}"
    refs = request.references(attack)
    path, query, body = request.parts(attack.a, attack.b)
    theirs = send(make(), request.method, path, query, body, area)
    problems = []
    text = answers.body_text(theirs) + theirs.get("Location", "")
    for sent in leaves([path, query, body]):  # what the attacker sent may come back
        if MARKER in str(sent):
            text = text.replace(str(sent), "")
    if MARKER in text.lower():
        problems.append(f"{label}: the answer shows tenant A's data ({path}?{query})")
    if theirs.status_code >= 500:
        problems.append(f"{label}: server error {theirs.status_code}")
    if not refs:
        return problems  # no id of A's in it: only leaks and changes are checked
    m_path, m_query, m_body = request.parts(attack.missing, attack.b)
    missing = send(make(), request.method, m_path, m_query, m_body, area)
    placeholders_a = [(a, f"<ref{i}>") for i, (a, _) in enumerate(refs)]
    placeholders_m = [(m, f"<ref{i}>") for i, (_, m) in enumerate(refs)]
    seen_a = answers.comparable(theirs, placeholders_a)
    seen_m = answers.comparable(missing, placeholders_m)
    if seen_a != seen_m:
        problems.append(
            f"{label}: A's object answers unlike a missing one: {differ(seen_a, seen_m)}"
        )
    in_url = any(str(a) in path for a, _ in refs)
    # The SDK-compatible API takes keys only: a session is refused before any lookup.
    keys_only = who == "B session" and route.route.startswith("compat/")
    if (
        in_url
        and area == "api"
        and theirs.status_code not in ((401, 404, 405) if keys_only else (404, 405))
    ):
        problems.append(f"{label}: answered {theirs.status_code} for A's object")
    if in_url and route.key.startswith("chats_ui:") and theirs.status_code not in (404, 405):
        problems.append(f"{label}: answered {theirs.status_code} for A's object")
    landing = route.key.endswith("_change") and request.method == "get"
    if landing and theirs.status_code == 302 and seen_a == seen_m:
        # The page the redirect lands on (with its "does not exist" message) must match too.
        landed_a = answers.comparable(_landing(make, theirs), placeholders_a)
        landed_m = answers.comparable(_landing(make, missing), placeholders_m)
        if landed_a != landed_m:
            problems.append(
                f"{label}: the redirect lands on different pages: {differ(landed_a, landed_m)}"
            )
    return problems


def differ(a: dict[str, Any], m: dict[str, Any]) -> str:
    out = []
    for key in a:
        if a[key] == m[key]:
            continue
        if key == "body" and isinstance(a[key], str) and isinstance(m[key], str):
            lines = difflib.unified_diff(
                m[key].splitlines(), a[key].splitlines(), "missing", "A's", n=0, lineterm=""
            )
            out.append("body: " + " | ".join(list(lines)[2:8]))
        else:
            out.append(f"{key}: {a[key]!r:.300} (missing: {m[key]!r:.300})")
    return "; ".join(out)


def _landing(make: Maker, response: Any) -> Any:
    """GET the redirect's target with the flash messages the redirect set."""
    client = make()
    for name, morsel in response.cookies.items():
        if name == "messages":
            client.cookies[name] = morsel.value
    return client.get(response["Location"])


#: The admin has the most routes: its attacks run in three parts, in parallel under xdist.
ADMIN_PARTS = 3


@pytest.mark.parametrize(
    ("area", "part", "parts"),
    [("api", 0, 1), ("site", 0, 1), *(("admin", i, ADMIN_PARTS) for i in range(ADMIN_PARTS))],
)
def test_tenant_b_cannot_reach_tenant_a_anywhere(attack, area, part, parts):
    before = snapshot(attack.a)
    count, failures = run_area(attack, area, part, parts)
    assert count > 10
    assert not failures, f"{len(failures)} of {count} attempts failed:\n" + "\n".join(failures)
    assert snapshot(attack.a) == before, "tenant B's attempts changed tenant A's data"
