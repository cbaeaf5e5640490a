"""A reached spending limit through the real SDKs: 429 with the protocol's quota error
(``quota_exceeded``), nothing stored, and the SDK told not to retry it."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from chatplatform.models import Tenant
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = [{"role": "user", "content": "Hello"}]
#: Another request (the same one sent again is a retry, answered from what is stored).
AGAIN = [{"role": "user", "content": "Something else"}]


def counting_client(http: Any = httpx) -> tuple[Any, list[int]]:
    """An HTTP client (of the SDK's HTTP library ``http``) that notes the status of every
    response the SDK receives."""
    seen: list[int] = []
    return http.Client(event_hooks={"response": [lambda r: seen.append(r.status_code)]}), seen


def limit_reached(tenant) -> None:
    with all_tenants():
        Tenant.objects.filter(pk=tenant.pk).update(spend_hard_tokens=0)


def message_count(tenant) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


def test_openai_gets_insufficient_quota_once(live_url, key_a, tenant_a):
    http, seen = counting_client()
    sdk: Any = openai.OpenAI(
        base_url=f"{live_url}/compat/openai/v1", api_key=key_a, max_retries=2, http_client=http
    )
    sdk.chat.completions.create(model="m", messages=HELLO)
    limit_reached(tenant_a)
    before = message_count(tenant_a)
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="m", messages=AGAIN)
    error: Any = refused.value.body
    assert error["type"] == "insufficient_quota" and error["code"] == "quota_exceeded"
    assert "monthly spending limit is reached" in error["message"]
    assert seen[-1] == 429 and seen.count(429) == 1  # not retried
    assert message_count(tenant_a) == before
    with pytest.raises(openai.RateLimitError):
        sdk.chat.completions.create(model="m", messages=AGAIN, stream=True)
    assert message_count(tenant_a) == before


def test_anthropic_gets_a_billing_error_once(live_url, key_a, tenant_a):
    http, seen = counting_client(httpx2)
    sdk: Any = anthropic.Anthropic(
        base_url=f"{live_url}/compat/anthropic", api_key=key_a, max_retries=2, http_client=http
    )
    sdk.messages.create(model="m", max_tokens=16, messages=HELLO)
    limit_reached(tenant_a)
    before = message_count(tenant_a)
    with pytest.raises(anthropic.RateLimitError) as refused:
        sdk.messages.create(model="m", max_tokens=16, messages=AGAIN)
    body: Any = refused.value.body
    assert body["error"]["type"] == "billing_error"
    assert "monthly spending limit is reached" in body["error"]["message"]
    assert seen.count(429) == 1
    assert message_count(tenant_a) == before
