"""Copying a policy into the admin's tenant, and where a new policy starts.

Presets are shared, so a tenant admin sees them read-only: to tune one, they copy it into
their tenant in one click ("Copy to my tenant" on the preset's page and in the list) and edit
the copy. Django's "Save as new" posts the form of the page, which on a read-only page holds
no fields: it is hidden there, and such a post copies the policy instead. A new policy's form
starts from the default preset's values, the same ones a tenant without a policy of its own
uses.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import ValidationError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import reverse
from django.utils.html import format_html

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.policies import default_preset
from chatplatform.selectors import tenants_for_admin
from chatplatform.services import PolicyNotAllowed, policy_copy, policy_settings

#: Fields of the form a new policy does not take from the default preset.
NOT_FROM_PRESET = ("description",)


def copy_label(policy: ContextPolicy) -> str:
    return "Copy to my tenant" if policy.is_preset else "Make a copy"


class PolicyCopyMixin:
    """Mixed into the ContextPolicy admin (a TenantScopedAdmin)."""

    admin_site: Any
    get_object: Any
    has_view_permission: Any
    has_change_permission: Any
    message_user: Any

    # --- where a new policy starts -----------------------------------------------------------

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """The default preset's values and the admin's tenant when they have only one, then
        whatever the address asks for."""
        preset = default_preset()
        initial: dict[str, Any] = {}
        if preset is not None:
            initial = policy_settings(preset)
            for name in NOT_FROM_PRESET:
                initial.pop(name, None)
        targets = self.copy_targets(request)
        if len(targets) == 1:
            initial["tenant"] = targets[0].pk
        initial.update(super().get_changeform_initial_data(request))  # type: ignore[misc]
        return initial

    # --- copying -----------------------------------------------------------------------------

    def copy_targets(self, request: HttpRequest) -> list[Tenant]:
        """Tenants the admin may copy a policy into: those they administer (superusers: all)."""
        return list(tenants_for_admin(request.user).order_by("name"))

    def copy_into(
        self, request: HttpRequest, policy: ContextPolicy, tenant_id: str
    ) -> HttpResponse:
        """Copy ``policy`` into the chosen tenant (or the admin's only one) and open the copy;
        on a refusal, back to the policy's page with the reason."""
        targets = self.copy_targets(request)
        if tenant_id:
            tenant = next((t for t in targets if str(t.pk) == tenant_id), None)
        else:
            tenant = targets[0] if len(targets) == 1 else None
        if tenant is None:
            problem = (
                "Choose the tenant to copy the policy into."
                if targets and not tenant_id
                else "You do not administer that tenant."
            )
            return self._refused(request, policy, problem)
        try:
            copy = policy_copy(policy=policy, tenant=tenant)
        except PolicyNotAllowed:
            return self._refused(
                request, policy, "A tenant's own policy can be copied only within that tenant."
            )
        except ValidationError as exc:
            return self._refused(
                request, policy, "The copy is not valid: " + " ".join(exc.messages)
            )
        self.message_user(
            request,
            f"“{policy.name}” was copied to {tenant.name} as “{copy.name}”. Adjust it, save, "
            "then make it active when it is ready.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(_change_url(copy))

    def _refused(self, request: HttpRequest, policy: ContextPolicy, problem: str) -> HttpResponse:
        self.message_user(request, problem, messages.ERROR)
        return HttpResponseRedirect(_change_url(policy))

    def copy_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The copy button of the policy's page and of the list (POST)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        policy = self.get_object(request, unquote(object_id))
        if policy is None or not self.has_view_permission(request, policy):
            raise Http404("No such policy.")
        return self.copy_into(request, policy, request.POST.get("copy_tenant", ""))

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # "Save as new" from a page the admin may only read (a preset) carries no fields:
        # copy the policy instead of validating an empty form.
        if request.method == "POST" and "_saveasnew" in request.POST and object_id:
            policy = self.get_object(request, unquote(object_id))
            if policy is not None and not self.has_change_permission(request, policy):
                if not self.has_view_permission(request, policy):
                    raise Http404("No such policy.")
                return self.copy_into(request, policy, request.POST.get("copy_tenant", ""))
        return super().changeform_view(  # type: ignore[misc]
            request, object_id, form_url, extra_context
        )

    def copy_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        """What the change page's copy button needs."""
        if obj is None or obj.pk is None:
            return {}
        return {"copy_targets": self.copy_targets(request), "copy_label": copy_label(obj)}

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        context.update(self.copy_context(request, obj))
        response = super().render_change_form(  # type: ignore[misc]
            request, context, add, change, form_url, obj
        )
        context_data = getattr(response, "context_data", None)
        if obj is not None and context_data is not None:
            # "Save as new" only where the page posts a form with the policy's fields.
            context_data["save_as"] = bool(self.has_change_permission(request, obj))
        return response

    @admin.display(description="copy")
    def copy_button(self, obj: ContextPolicy) -> str:
        """The list's copy button: it submits the list's form (its CSRF token) to the copy
        address of this row. An admin of several tenants chooses one on the policy's page."""
        url = reverse("admin:chatplatform_contextpolicy_copy", args=[obj.pk])
        return format_html(
            '<button type="submit" class="button policy-copy-row" formaction="{}" '
            'formmethod="post" name="copy_tenant" value="">{}</button>',
            url,
            copy_label(obj),
        )


def _change_url(policy: ContextPolicy) -> str:
    return reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk])
