"""The OpenAPI schema: valid with no warnings, served with an interactive page that loads
nothing from a CDN, and honoured by the API (schemathesis generates requests from it, in
positive and negative mode, and checks every response: no 5xx, documented status codes,
content types, headers and bodies)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok

from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import all_tenants
from memory.services import fact_save
from tests.api.conftest import API
from tests.api.helpers import add_message, add_turn

#: Schema-valid input may still be refused for what a schema cannot say (a username that is
#: not a member, a message longer than the tenant's policy allows): 400 and 413 are fine there.
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "413", "429"]
            }
        }
    }
)
#: Examples per operation and mode: enough to walk every status path, small enough to be fast.
EXAMPLES = 4


def test_schema_validates_without_warnings(tmp_path, db):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    text = target.read_text()
    assert "/api/v1/conversations/{conversation_id}/messages/" in text
    assert "text/event-stream" in text


def test_schema_and_docs_are_served_without_a_cdn(client, db):
    schema = client.get(f"{API}/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    document = schema.json()
    assert document["openapi"].startswith("3.")
    assert {"apiKey", "session"} <= set(document["components"]["securitySchemes"])
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"401", "403", "429"} <= codes, (method, path)
            assert operation.get("summary"), (method, path)
    docs = client.get(f"{API}/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn" not in html.lower() and "unpkg" not in html.lower()
    asset = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert asset.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_api_honours_its_schema(settings_override, tenant_a, member_a, admin_a, key_a):
    from chats.services import conversation_create

    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="fuzz")
    message = add_turn(conversation, member_a).user_message
    assert message is not None
    add_message(conversation, member_a, "hello")
    fact = fact_save(tenant_a, member_a, "likes fuzzing")
    with all_tenants():
        profile = ModelProfile.objects.filter(tenant__isnull=True).first()
    assert profile is not None
    real_ids = {
        "conversation_id": conversation.pk,
        "message_id": message.pk,
        "fact_id": fact.pk,
        "profile_id": profile.pk,
    }
    schema = schemathesis.openapi.from_wsgi(f"{API}/schema/", get_wsgi_application(), config=CONFIG)
    headers = {"Authorization": f"Bearer {key_a}"}
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results)
    assert len(operations) == 34
    for operation in operations:
        if operation.method.upper() == "DELETE" or operation.path.endswith("/leave/"):
            continue  # deleting or leaving the fixtures would turn every later call into a 404
        fixed = {
            name: value for name, value in real_ids.items() if name in operation.path_parameters
        }
        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
        if operation.path.rstrip("/") in ("", API):
            modes = [GenerationMode.POSITIVE]  # the root takes no input that could be invalid
        for mode in modes:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed or None)
            _run(strategy, headers)


def _run(strategy: Any, headers: dict[str, str]) -> None:
    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers)

    check()


@pytest.fixture
def settings_override(settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_key": "100000/min", "api_user": "100000/min"},
    }
    settings.API_REPLY_WAIT_SECONDS = 10
    return settings
