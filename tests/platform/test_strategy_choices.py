"""The policy's strategy field and form ask the strategy registry: its choices (stored values
unchanged), its default, what each choice does, and which sections the live bar shows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.core.context.strategies import STRATEGIES, strategy_choices
from chatplatform.core.context.types import DEFAULT_STRATEGY
from chatplatform.models import ContextPolicy
from tests.factories import make_policy

pytestmark = pytest.mark.django_db


def test_the_field_offers_the_registry_s_strategies() -> None:
    field = ContextPolicy._meta.get_field("strategy")
    choices = list(field.choices or [])
    assert choices == strategy_choices()
    assert [value for value, _ in choices] == [
        "sliding_window",
        "rolling_summary",
        "hybrid",
        "server_compaction",
    ]
    assert field.default == DEFAULT_STRATEGY == "hybrid"


def test_the_policy_form_says_what_each_strategy_does(client, admin_a, tenant_a) -> None:
    client.force_login(admin_a)
    policy = make_policy(tenant_a, name="Mine")
    page = client.get(reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for strategy in STRATEGIES:
        assert strategy.label in html
        assert f"{strategy.title}: {strategy.help}".replace("'", "&#x27;") in html
    sections = page.context["strategy_sections"]
    assert sections["default"] == "hybrid"
    assert sections["strategies"]["hybrid"] == {"summaries": True, "retrieval": True}
    assert sections["strategies"]["sliding_window"] == {"summaries": False, "retrieval": False}
    assert 'id="policy-strategy-sections"' in html
