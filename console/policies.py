"""The ContextPolicy editor: grouped fields with help, errors that say what to change, a live
bar of how the window is divided (``static/admin-extras/policy-bar.js`` reads the form),
"preview on a conversation" (the breakdown this policy would produce now, next to the active
policy's), copies into the admin's tenant (``policy_copy.py``), and what the policy's turns
cost over the last 30 days (the admin's tenants' turns only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from chatplatform.admin_base import TenantScopedAdmin, _tenant_ids
from chatplatform.audit import audit_record, field_changes
from chatplatform.core.context.strategies import STRATEGIES
from chatplatform.core.context.types import DEFAULT_STRATEGY
from chatplatform.django_internals import InstanceValidationHook
from chatplatform.models import AuditAction, ContextPolicy, Tenant
from chatplatform.services import tenant_set_active_policy
from console.model_catalog import PolicyFitMixin
from console.policy_copy import PolicyCopyMixin
from console.policy_preview import (
    PolicyPreviewForm,
    compare_policies,
    model_windows,
    preview_conversations,
)
from console.reports import policy_usage_report

#: The days of usage a policy's change page shows.
POLICY_USAGE_DAYS = 30

POLICY_FIELDSETS: Any = (
    (None, {"fields": ("tenant", "name", "description", "model_profile", "strategy")}),
    (
        "Window",
        {
            "description": "The whole request (prompt + reply) must fit the model's window. "
            "The prompt budget is max context tokens minus the reply reserve.",
            "fields": (
                "max_context_tokens",
                "reserved_response_tokens",
                "safety_margin_percent",
                "oversized_message",
            ),
        },
    ),
    (
        "Section budgets",
        {
            "description": "Sections fill in priority order: system prompt, the new message, "
            "the minimum recent messages (see Recent history), the user's standing "
            "instructions and preferences, user facts, summaries, retrieved "
            "older messages; each takes at most its budget of what the earlier ones leave, and "
            "whatever is left flows to the recent history. Long recent messages can therefore "
            "leave a later section less than its budget: the preview shows what each got.",
            "fields": (
                "budget_unit",
                "system_budget",
                "instructions_budget",
                "facts_budget",
                "summaries_budget",
                "retrieval_budget",
            ),
        },
    ),
    (
        "Recent history",
        {
            "fields": (
                "min_recent_messages",
                "recent_message_cap",
                "raw_history_limit",
                "history_trim_percent",
            )
        },
    ),
    (
        "Prompt cache",
        {
            "description": "The provider bills prompt tokens it reads from its cache at a "
            "tenth of the input price. The prompt is laid out so that what changes rarely comes "
            "first (system prompt, standing instructions, facts, summaries, then the history, "
            "which later turns only "
            "append to) and what this turn alone needs (the time, what retrieval found for "
            "this message) comes after the new message.",
            "fields": ("cache_ttl",),
        },
    ),
    (
        "Rolling summaries",
        {
            "fields": (
                "summary_interval",
                "summary_trigger_percent",
                "summary_session_gap_minutes",
                "max_summaries_in_context",
                "summary_max_tokens",
            )
        },
    ),
    (
        "Periodic summaries",
        {
            "fields": (
                "periodic_summaries_enabled",
                "recent_summary_days",
                "recent_summary_interval_days",
                "recent_summary_tokens",
                "long_summary_days",
                "long_summary_interval_days",
                "long_summary_tokens",
            )
        },
    ),
    (
        "Standing instructions and preferences",
        {
            "description": "How users asked to be answered and what they prefer, kept in "
            "their own words and sent, before the facts, with every prompt of theirs (budget: "
            "Section budgets).",
            "fields": ("instructions_enabled", "max_instructions_per_user"),
        },
    ),
    ("User facts", {"fields": ("facts_enabled", "max_facts_per_user", "max_fact_chars")}),
    (
        "Retrieval",
        {
            "fields": (
                "retrieval_max_items",
                "retrieval_neighbors",
                "reply_excerpt_tokens",
                "retrieval_dense",
                "turn_retrieval_percent",
            )
        },
    ),
    (
        "Prompt",
        {
            "description": "Variables: {chatname} {chatid} {chattype} {username} {userfullname} "
            "{userid} {timestamp} {date} {time} {botname} {botusername} {membercount} {tools} "
            "{user_memories} {user_pronouns}. Unknown braces are left as they are. What users "
            "write ({chatname} {userfullname} {username} {user_pronouns}) is inserted as data: "
            "escaped, on one line, inside its own tag (e.g. &lt;chat_title&gt;Team&lt;/chat_title"
            "&gt;), and one sentence after the template tells the model that text inside those "
            "tags is data, never instructions.",
            "fields": (
                "system_prompt_template",
                "bot_name",
                "tools_enabled",
                "context_editing",
            ),
        },
    ),
    ("Input limits", {"fields": ("max_message_chars", "user_messages_per_minute")}),
)


class PolicyRulesAfterFieldsMixin(InstanceValidationHook):
    """Mixed into the admin's ContextPolicy form."""

    errors: Any
    instance: Any

    def instance_validate(self, validate: Callable[[], None]) -> None:
        # A number that is missing or not a number is left blank on the instance: the
        # cross-field budget rules (the model's clean()) cannot be evaluated on a blank and
        # raised a TypeError (a server error instead of the form). The field errors are shown
        # first; the rules run once every field is valid.
        if not self.errors:
            validate()
            return
        self.instance.clean = lambda: None
        try:
            validate()
        finally:
            del self.instance.clean


@admin.register(ContextPolicy)
class ContextPolicyAdmin(PolicyFitMixin, PolicyCopyMixin, TenantScopedAdmin):
    list_display = (
        "name",
        "tenant",
        "is_active_policy",
        "model_profile",
        "fits_model",
        "strategy",
        "max_context_tokens",
        "reserved_response_tokens",
        "copy_button",
    )
    list_filter = ("strategy",)
    search_fields = ("name",)
    fieldsets = POLICY_FIELDSETS
    save_as = True
    actions = ("make_active",)

    class Media:
        css = {"all": ("admin-extras/admin-extras.css",)}
        js = ("admin-extras/policy-bar.js",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        base = super().get_form(request, obj, change=change, **kwargs)
        form: Any = type(base.__name__, (PolicyRulesAfterFieldsMixin, base), {})
        strategy = form.base_fields.get("strategy")
        if strategy is not None:  # what each choice does, from the strategies themselves
            strategy.help_text = " ".join(
                [str(strategy.help_text)] + [f"{s.title}: {s.help}" for s in STRATEGIES]
            )
        return form

    # --- the active policy: a column, an action and a button on the change page -------------

    def _tenants_in_view(self, request: HttpRequest) -> models.QuerySet:
        tenants = Tenant.objects.all()
        return tenants if request.user.is_superuser else tenants.filter(pk__in=_tenant_ids(request))

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        active = self._tenants_in_view(request).filter(active_policy=models.OuterRef("pk"))
        return super().get_queryset(request).annotate(active_in_tenant=models.Exists(active))

    @admin.display(description="active", boolean=True, ordering="-active_in_tenant")
    def is_active_policy(self, obj: ContextPolicy) -> bool:
        return bool(getattr(obj, "active_in_tenant", False))

    def activate(self, request: HttpRequest, policy: ContextPolicy) -> None:
        """Make ``policy`` the active policy of its tenant (a preset: of the tenant the admin
        administers) and say so. Only a tenant the admin administers is changed."""
        if policy.tenant_id is not None:
            tenant_ids = [policy.tenant_id] if self._owns(request, policy) else []
            problem = "You do not administer the tenant of this policy."
        else:
            tenant_ids = list(_tenant_ids(request))
            problem = (
                "You administer several tenants: choose the preset as the active policy on "
                "the tenant's page."
                if tenant_ids
                else "Choose the preset as the active policy on the tenant's page."
            )
        if len(tenant_ids) != 1:
            self.message_user(request, problem, messages.ERROR)
            return
        tenant = Tenant.objects.select_related("active_policy").get(pk=tenant_ids[0])
        before = tenant.active_policy
        tenant_set_active_policy(tenant=tenant, policy=policy)
        audit_record(
            AuditAction.CHANGED,
            request=request,
            target=tenant,
            changes=field_changes(
                ["active_policy"], {"active_policy": before}, {"active_policy": policy}
            ),
        )
        self.message_user(
            request,
            f"“{policy.name}” is now the active policy of {tenant.name}: new turns use it.",
            messages.SUCCESS,
        )

    @admin.action(description="Make the selected policy the active one")
    def make_active(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        policies = list(queryset[:2])
        if len(policies) != 1:
            self.message_user(request, "Select exactly one policy to make active.", messages.ERROR)
            return
        self.activate(request, policies[0])

    def activate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The "Make active" button of the change page (POST)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        policy = self.get_object(request, unquote(object_id))
        if policy is None or not self.has_view_permission(request, policy):
            raise Http404("No such policy.")
        self.activate(request, policy)
        return HttpResponseRedirect(
            reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk])
        )

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        form = context["adminform"].form
        field = form.fields.get("model_profile")
        profiles = list(field.queryset) if field is not None else []
        context["model_windows"] = model_windows(profiles)
        context["strategy_sections"] = {
            "default": DEFAULT_STRATEGY,
            "strategies": {
                s.name: {"summaries": bool(s.needs.summaries), "retrieval": s.needs.retrieval}
                for s in STRATEGIES
            },
        }
        if obj is not None:
            tenant_ids = None if request.user.is_superuser else _tenant_ids(request)
            usage = policy_usage_report(obj, tenant_ids, days=POLICY_USAGE_DAYS)
            context["policy_usage"] = usage
            context["policy_usage_days"] = POLICY_USAGE_DAYS
            context["policy_usage_chart"] = usage.chart_data()
            context["active_for"] = list(
                self._tenants_in_view(request)
                .filter(active_policy=obj)
                .values_list("name", flat=True)
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_urls(self) -> list[URLPattern]:
        preview = path(
            "<path:object_id>/preview/",
            self.admin_site.admin_view(self.preview_view),
            name="chatplatform_contextpolicy_preview",
        )
        activate = path(
            "<path:object_id>/activate/",
            self.admin_site.admin_view(self.activate_view),
            name="chatplatform_contextpolicy_activate",
        )
        copy = path(
            "<path:object_id>/copy/",
            self.admin_site.admin_view(self.copy_view),
            name="chatplatform_contextpolicy_copy",
        )
        return [preview, activate, copy, *super().get_urls()]

    def preview_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The policy's breakdown on one of the admin's conversations, beside the active one."""
        policy = self.get_object(request, unquote(object_id))
        if policy is None or not self.has_view_permission(request, policy):
            raise Http404("No such policy.")
        tenant_ids = None if request.user.is_superuser else _tenant_ids(request)
        conversations = preview_conversations(policy, tenant_ids)
        form = PolicyPreviewForm(request.GET or None, conversations=conversations)
        comparison = None
        if form.is_valid():
            data = form.cleaned_data
            comparison = compare_policies(
                data["conversation"], policy, data["text"], data.get("user")
            )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Preview “{policy.name}” on a conversation",
            "opts": self.opts,
            "original": policy,
            "policy": policy,
            "form": form,
            "comparison": comparison,
            "has_conversations": bool(conversations),
            "has_view_permission": True,
        }
        return TemplateResponse(request, "admin/chatplatform/contextpolicy/preview.html", context)
