"""The admin's side of model profiles from the provider.

* On model profiles, the action "Update from the provider" runs
  :func:`chatplatform.model_catalog.model_profiles_update_from_provider` (the periodic job's
  service). Only a superuser may run it: it rewrites shared profiles every tenant uses, with
  the operator's key; a tenant admin neither sees the action nor can post it.
* On policies, a column and a warning on the change page name a policy whose budgets no
  longer fit its model (e.g. after the provider reported a smaller window). Nothing is changed
  for the admin: their turns still fit, because packing clamps the prompt to the window.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest, HttpResponse

from chatplatform.model_catalog import (
    CatalogUnavailable,
    model_profiles_update_from_provider,
    policy_label,
)
from chatplatform.models import ContextPolicy
from chatplatform.models.policy_validation import policy_errors

PRICE_FIELDS = frozenset(
    {
        "price_input_per_mtok",
        "price_output_per_mtok",
        "price_cache_read_per_mtok",
        "price_cache_write_per_mtok",
        "price_cache_write_1h_per_mtok",
    }
)


class ModelCatalogActionMixin:
    """For the model profile admin: the update action, and prices set clear the flag."""

    message_user: Any

    def has_update_from_provider_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    @admin.action(
        description="Update from the provider (every shared Anthropic profile)",
        permissions=("update_from_provider",),
    )
    def update_from_provider(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        try:
            result = model_profiles_update_from_provider()
        except CatalogUnavailable as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, result.summary(), messages.SUCCESS)
        if result.unfit_policies:
            names = ", ".join(policy_label(p) for p in result.unfit_policies)
            self.message_user(
                request,
                "These policies no longer fit their model and keep their values until an "
                f"admin changes them (their turns are clamped to the window): {names}.",
                messages.WARNING,
            )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if PRICE_FIELDS & set(form.changed_data):
            obj.prices_unknown = False
        super().save_model(request, obj, form, change)  # type: ignore[misc]


class PolicyFitMixin:
    """For the policy admin: does the policy still fit its model?"""

    message_user: Any

    @admin.display(description="fits its model", boolean=True)
    def fits_model(self, obj: ContextPolicy) -> bool:
        return not policy_errors(obj)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if request.method == "GET":
            policy = self.get_object(request, object_id)  # type: ignore[attr-defined]
            problems = policy_errors(policy) if policy is not None else {}
            if problems:
                text = "; ".join(m for messages_ in problems.values() for m in messages_)
                self.message_user(
                    request,
                    f"This policy no longer fits {policy.model_profile}: {text}. Its turns are "
                    "clamped to the model's window until you change it.",
                    messages.WARNING,
                )
        return super().change_view(request, object_id, form_url, extra_context)  # type: ignore[misc]
