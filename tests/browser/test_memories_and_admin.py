"""Memories and the tenant admin in a real browser: add a fact and see /memories list it; a
tenant admin edits a policy, is told what to change, fixes it, previews it and makes it active;
the usage (per day and per policy), a policy's own usage and the job pages draw."""

from __future__ import annotations

import pytest

from chats.services import conversation_create
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.factories import make_policy
from tests.ui.conftest import answered_turn

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


def test_add_a_fact_and_see_it_listed(page, tenant_a, member_a):
    log_in(page, member_a.username)
    page.click("nav >> text=Memories")
    page.fill("#fact-add textarea[name=text]", "I live in Lisbon")
    page.fill("#fact-add input[name=key]", "home city")
    page.click("#fact-add button[type=submit]")
    page.wait_for_url("**/memories/")
    facts = page.locator("#facts")
    assert "I live in Lisbon" in facts.inner_text() and "home_city" in facts.inner_text()
    page.click("#facts >> text=Edit")
    page.fill("textarea[name=text]", "I live in Porto")
    page.click("button:has-text('Save')")
    assert "I live in Porto" in page.inner_text("#facts")
    assert "I live in Lisbon" in page.inner_text("main")  # kept as history
    screenshot(page, "10-memories")


def test_add_an_instruction_then_edit_and_delete_it(page, tenant_a, member_a):
    log_in(page, member_a.username)
    page.goto("/memories/")
    page.select_option("#fact-add select[name=kind]", "instruction")
    page.fill("#fact-add textarea[name=text]", "From now on, answer in Spanish")
    page.click("#fact-add button[type=submit]")
    page.wait_for_url("**/memories/")
    standing = page.locator("#standing")
    assert "Instruction" in standing.inner_text()
    assert "From now on, answer in Spanish" in standing.inner_text()
    assert page.locator("#facts").count() == 0  # not among the facts
    page.click("#standing >> text=Edit")
    page.fill("textarea[name=text]", "From now on, answer in French")
    page.click("button:has-text('Save')")
    page.wait_for_url("**/memories/")
    assert "From now on, answer in French" in page.inner_text("#standing")
    assert "From now on, answer in Spanish" in page.inner_text("main")  # kept as history
    screenshot(page, "10b-memories-instructions")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#standing button.danger")
    page.wait_for_selector("#standing", state="detached")
    assert "None yet" in page.inner_text("#standing-card")


def test_tenant_admin_edits_a_policy_fixes_an_error_previews_it_and_makes_it_active(
    page, tenant_a, admin_a, member_a
):
    policy = make_policy(
        tenant_a,
        name="Compact",
        max_context_tokens=16000,
        reserved_response_tokens=1024,
        system_budget=1000,
        instructions_budget=1500,
        facts_budget=500,
        summaries_budget=2000,
        retrieval_budget=2000,
    )
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Big history")
    for i in range(10):
        answered_turn(conversation, member_a, f"Turn {i}: " + "details of the plan " * 300)

    log_in(page, admin_a.username)
    page.goto(f"/admin/chatplatform/contextpolicy/{policy.pk}/change/")
    bar = page.locator("#policy-bar")
    assert "History (what is left)" in bar.inner_text()
    # The standing instructions' budget counts while they are on.
    assert "Instructions: 1,500" in page.inner_text("#policy-bar-legend")
    page.uncheck("input[name=instructions_enabled]")
    assert "Instructions: 0 " in page.inner_text("#policy-bar-legend")
    page.check("input[name=instructions_enabled]")
    screenshot(page, "11-policy-editor")

    # The bar shows the sections the chosen strategy fills (its registry entry says which).
    legend = page.locator("#policy-bar-legend")
    assert "Retrieved: 2,000" in legend.inner_text()
    page.select_option("select[name=strategy]", "sliding_window")
    assert "Summaries: 0 " in legend.inner_text() and "Retrieved: 0 " in legend.inner_text()
    page.select_option("select[name=strategy]", "rolling_summary")
    assert "Summaries: 2,000" in legend.inner_text() and "Retrieved: 0 " in legend.inner_text()
    page.select_option("select[name=strategy]", "hybrid")
    assert "Retrieved: 2,000" in legend.inner_text()

    # The live bar reacts to the fields before anything is saved.
    page.fill("input[name=max_context_tokens]", "300000")
    page.wait_for_selector("#policy-bar-warning:visible")
    assert "exceed the window" in page.inner_text("#policy-bar-warning")
    page.fill("input[name=summaries_budget]", "90000")
    page.click("input[name=_continue]")
    errors = page.inner_text(".errornote, .errorlist")
    assert "correct the error" in errors.lower() or "exceed" in errors.lower()
    field_errors = page.inner_text("#contextpolicy_form")
    assert "context window" in field_errors
    screenshot(page, "12-policy-error")

    page.fill("input[name=max_context_tokens]", "16000")
    page.fill("input[name=summaries_budget]", "2000")
    page.wait_for_selector("#policy-bar-warning", state="hidden")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist .success")

    page.click("a.policy-preview-link")
    page.select_option("select[name=conversation]", str(conversation.pk))
    page.click("input[type=submit][value=Preview]")
    page.wait_for_selector("#preview-this")
    this = page.inner_text("#preview-this")
    active = page.inner_text("#preview-active")
    assert "Compact" in this and "saved" in this and "did not fit the budget" in this
    assert "Hybrid" in active
    # Nothing pushes the preview sideways, on a phone either.
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    screenshot(page, "13-policy-preview")

    # "Make active" on the policy's page: new turns of the tenant use it.
    page.goto(f"/admin/chatplatform/contextpolicy/{policy.pk}/change/")
    page.click("button.policy-activate-button")
    page.wait_for_selector(".messagelist .success")
    assert "is now the active policy" in page.inner_text(".messagelist")
    assert "Active policy of: Tenant A" in page.inner_text(".policy-active-note")
    screenshot(page, "14-policy-made-active")
    tenant_a.refresh_from_db()
    assert tenant_a.active_policy_id == policy.pk


def ensure_beat_schedules() -> None:
    """Transactional tests flush every table, the data migration's schedules included."""
    import importlib

    from django.apps import apps

    importlib.import_module("summaries.migrations.0003_beat_schedules").forwards(apps, None)


def test_usage_and_job_pages(page, tenant_a, admin_a, member_a):
    ensure_beat_schedules()
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Usage")
    for i in range(3):
        answered_turn(conversation, member_a, f"Question {i} " + "about costs " * 100)
    log_in(page, admin_a.username)
    page.goto("/admin/")
    screenshot(page, "14-admin-index")
    page.click("#reports-module >> text=Usage")
    page.wait_for_selector("body[data-charts-ready='1']")
    assert "3" in page.inner_text("#usage-totals")
    assert "Offline (built in)" in page.inner_text("#calibration")
    policies = page.inner_text("#usage-policy-table")
    assert "Hybrid (preset)\t3\t" in policies  # the preset served every turn
    screenshot(page, "15-usage")
    page.click("#usage-policy-table >> text=Hybrid")
    page.wait_for_selector("body[data-charts-ready='1']")
    assert "3" in page.inner_text("#policy-usage .report-totals")
    page.locator("#policy-usage").scroll_into_view_if_needed()
    screenshot(page, "15-policy-usage", full_page=False)
    page.goto("/admin/chatplatform/tenant/usage/")
    page.click("text=Background jobs")
    assert "summaries: backfill token counts" in page.inner_text("#schedules")
    screenshot(page, "16-jobs")
