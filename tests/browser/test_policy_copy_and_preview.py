"""A tenant admin in a real browser copies the Hybrid preset into their tenant with one click
in the policy list, lands on the copy, and previews a member's next turn with that member's
facts in the meter."""

from __future__ import annotations

import re

import pytest

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import all_tenants
from chats.services import conversation_create
from memory.services import fact_save
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.ui.conftest import answered_turn

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


def test_copy_a_preset_in_one_click_and_preview_a_turn_with_facts(
    page, tenant_a, admin_a, member_a
):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Lisbon trip")
    answered_turn(conversation, member_a, "Which train should we take?")
    fact_save(tenant_a, member_a, "Lives in Lisbon", key="home city")
    fact_save(tenant_a, member_a, "Travels with a bicycle")

    log_in(page, admin_a.username)
    page.goto("/admin/chatplatform/contextpolicy/")
    row = page.locator(
        "#result_list tbody tr", has=page.locator("th a", has_text=re.compile("^Hybrid$"))
    )
    row.locator("button.policy-copy-row").click()
    page.wait_for_selector(".messagelist .success")
    assert "Hybrid (copy)" in page.inner_text(".messagelist")
    assert page.input_value("input[name=name]") == "Hybrid (copy)"
    screenshot(page, "22-policy-copied")
    with all_tenants():
        copy = ContextPolicy.objects.get(tenant=tenant_a, name="Hybrid (copy)")
        hybrid = ContextPolicy.objects.get(tenant__isnull=True, name="Hybrid")
    assert page.url.endswith(f"/admin/chatplatform/contextpolicy/{copy.pk}/change/")
    assert (copy.max_context_tokens, copy.retrieval_budget) == (
        hybrid.max_context_tokens,
        hybrid.retrieval_budget,
    )

    page.click("a.policy-preview-link")
    page.select_option("select[name=conversation]", str(conversation.pk))
    page.click("input[type=submit][value=Preview]")
    page.wait_for_selector("#preview-this")
    assert member_a.username in page.inner_text("#preview-author")
    facts_row = page.locator(
        "#preview-this tr", has=page.locator("td", has_text=re.compile("^Facts$"))
    )
    cells = facts_row.locator("td.num").all_inner_texts()
    assert int(cells[0]) > 0 and cells[2] == "2", cells  # tokens, budget, items
    screenshot(page, "23-policy-preview-with-facts")
