"""The operator's admin of tenants' single sign-on (OpenID Connect providers).

Only the platform's operator (a superuser) sees or edits these: a tenant's identity provider
decides who may join the tenant. The client secret is write-only (stored encrypted, never
shown back, recorded in the audit log only as changed); the issuer must pass the operator's
rules for identity providers' endpoints; an e-mail domain belongs to one tenant only.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters

from chatplatform.admin_base import TenantScopedAdmin
from chatplatform.models import IdentityProvider
from chatplatform.models.identity import normalized_domains
from chatplatform.single_sign_on.provider_endpoints import EndpointRefused, endpoint_check
from chatplatform.tenancy.scoping import all_tenants


class IdentityProviderForm(forms.ModelForm):
    issuer = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text=IdentityProvider._meta.get_field("issuer").help_text,
    )
    client_secret = forms.CharField(
        label="Client secret",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted and never shown again. Leave empty to keep the current one.",
    )

    class Meta:
        model = IdentityProvider
        fields = ("tenant", "enabled", "issuer", "client_id", "email_domains", "default_role")

    def clean_issuer(self) -> str:
        issuer: str = self.cleaned_data["issuer"]
        try:
            endpoint_check(issuer)
        except EndpointRefused as exc:
            raise forms.ValidationError(exc.message) from None
        return issuer

    def clean_email_domains(self) -> str:
        domains = normalized_domains(self.cleaned_data.get("email_domains") or "")
        if not domains:
            raise forms.ValidationError("Name at least one e-mail domain.")
        for domain in domains:
            if "." not in domain or "@" in domain:
                raise forms.ValidationError(f"{domain!r} is not an e-mail domain.")
        with all_tenants():
            others = IdentityProvider.objects.exclude(pk=self.instance.pk).select_related("tenant")
            for other in others:
                taken = sorted(set(domains) & set(other.domains))
                if taken:
                    raise forms.ValidationError(
                        f"{', '.join(taken)} already logs in to the tenant {other.tenant}."
                    )
        return "\n".join(domains)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if not (cleaned.get("client_secret") or self.instance.has_client_secret):
            self.add_error("client_secret", "Set the client secret registered at the provider.")
        return cleaned

    def save(self, commit: bool = True) -> Any:
        secret = self.cleaned_data.get("client_secret") or ""
        if secret:
            self.instance.set_client_secret(secret)
        return super().save(commit)


@admin.register(IdentityProvider)
class IdentityProviderAdmin(TenantScopedAdmin):
    form = IdentityProviderForm
    list_display = ("tenant", "enabled", "issuer", "client_id", "default_role")
    list_filter = ("enabled",)
    list_select_related = ("tenant",)
    readonly_fields = ("client_secret_status", "redirect_uri", "updated_at")

    def _operator(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._operator(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._operator(request)

    @admin.display(description="Client secret")
    def client_secret_status(self, obj: IdentityProvider) -> str:
        return "set (not shown)" if obj.has_client_secret else "not set"

    @admin.display(description="Redirect URI to register at the provider")
    def redirect_uri(self, obj: IdentityProvider) -> str:
        if not obj.tenant_id:
            return "shown once the tenant is chosen and saved"
        path = reverse("sso_callback", kwargs={"slug": obj.tenant.slug})
        return f"this site's address followed by {path}"

    @method_decorator(sensitive_post_parameters("client_secret"))  # kept out of error reports
    def changeform_view(self, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(*args, **kwargs)
