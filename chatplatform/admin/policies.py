"""The ContextPolicy editor: grouped fields with help, errors that say what to change, a live
bar of how the window is divided (``static/admin-extras/policy-bar.js`` reads the form), and
"preview on a conversation" (the breakdown this policy would produce now, next to the active
policy's)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from chatplatform.admin.base import TenantScopedAdmin, _tenant_ids
from chatplatform.admin.policy_preview import (
    PolicyPreviewForm,
    compare_policies,
    model_windows,
    preview_conversations,
)
from chatplatform.models import ContextPolicy

POLICY_FIELDSETS: Any = (
    (None, {"fields": ("tenant", "name", "description", "model_profile", "strategy")}),
    (
        "Window",
        {
            "description": "The whole request (prompt + reply) must fit the model's window. "
            "The prompt budget is max context tokens minus the reply reserve.",
            "fields": ("max_context_tokens", "reserved_response_tokens", "safety_margin_percent"),
        },
    ),
    (
        "Section budgets",
        {
            "description": "Sections fill in priority order: system prompt, user facts, "
            "summaries, retrieved older messages; whatever they leave flows to the recent history.",
            "fields": (
                "budget_unit",
                "system_budget",
                "facts_budget",
                "summaries_budget",
                "retrieval_budget",
            ),
        },
    ),
    (
        "Recent history",
        {"fields": ("min_recent_messages", "recent_message_cap", "raw_history_limit")},
    ),
    (
        "Rolling summaries",
        {
            "fields": (
                "summary_interval",
                "summary_trigger_percent",
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
    ("User facts", {"fields": ("facts_enabled", "max_facts_per_user", "max_fact_chars")}),
    ("Retrieval", {"fields": ("retrieval_max_items", "retrieval_neighbors", "retrieval_dense")}),
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
            "fields": ("system_prompt_template", "bot_name", "tools_enabled"),
        },
    ),
    ("Input limits", {"fields": ("max_message_chars", "user_messages_per_minute")}),
)


class PolicyRulesAfterFieldsMixin:
    """Mixed into the admin's ContextPolicy form."""

    _errors: Any
    instance: Any

    def _post_clean(self) -> None:
        # A number that is missing or not a number is left blank on the instance: the
        # cross-field budget rules (the model's clean()) cannot be evaluated on a blank and
        # raised a TypeError (a server error instead of the form). The field errors are shown
        # first; the rules run once every field is valid.
        if not self._errors:
            super()._post_clean()  # type: ignore[misc]
            return
        self.instance.clean = lambda: None
        try:
            super()._post_clean()  # type: ignore[misc]
        finally:
            del self.instance.clean


@admin.register(ContextPolicy)
class ContextPolicyAdmin(TenantScopedAdmin):
    list_display = (
        "name",
        "tenant",
        "model_profile",
        "strategy",
        "max_context_tokens",
        "reserved_response_tokens",
    )
    list_filter = ("strategy",)
    search_fields = ("name",)
    fieldsets = POLICY_FIELDSETS
    save_as = True

    class Media:
        css = {"all": ("admin-extras/admin-extras.css",)}
        js = ("admin-extras/policy-bar.js",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (PolicyRulesAfterFieldsMixin, form), {})

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
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_urls(self) -> list[URLPattern]:
        preview = path(
            "<path:object_id>/preview/",
            self.admin_site.admin_view(self.preview_view),
            name="chatplatform_contextpolicy_preview",
        )
        return [preview, *super().get_urls()]

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
            comparison = compare_policies(
                form.cleaned_data["conversation"], policy, form.cleaned_data["text"]
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
