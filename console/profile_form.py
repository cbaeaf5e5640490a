"""The model profile's admin form: a tenant's own endpoint and its write-only API key.

The key is never shown back: the form has an empty password input that sets or replaces it
and a box that clears it; the page only says whether one is set. A tenant's endpoint is
checked against the operator's rules (:mod:`chatplatform.model_endpoints`) when saved.
"""

from __future__ import annotations

from typing import Any

from django import forms

from chatplatform.core.llm.endpoints import EndpointRefused, check_endpoint
from chatplatform.core.llm.providers import PROVIDERS
from chatplatform.model_endpoints import endpoint_policy
from chatplatform.models import ModelProfile


class ModelProfileForm(forms.ModelForm):
    base_url = forms.URLField(
        label="Base URL",
        required=False,
        assume_scheme="https",
        help_text=ModelProfile._meta.get_field("base_url").help_text,
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "Only for your own endpoint (base URL): the key sent there, stored encrypted and "
            "never shown again. Leave empty to keep the current key."
        ),
    )
    clear_api_key = forms.BooleanField(
        label="Clear the API key", required=False, help_text="Remove the stored API key."
    )

    class Meta:
        model = ModelProfile
        fields = "__all__"  # noqa: DJ007 (the admin decides which fields it shows)

    def _tenant(self, cleaned: dict[str, Any]) -> Any:
        if "tenant" in self.fields:
            return cleaned.get("tenant")
        return self.instance.tenant if self.instance.tenant_id else None

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        base_url = cleaned.get("base_url") or ""
        new_key = cleaned.get("api_key") or ""
        if self._tenant(cleaned) is None:
            if new_key:
                self.add_error(
                    "api_key",
                    "A platform-wide profile uses the platform's credentials (settings); "
                    "an own API key belongs to a tenant's profile with its own endpoint.",
                )
            return cleaned
        if not base_url:
            if new_key:
                self.add_error(
                    "api_key",
                    "An API key goes with your own endpoint: set the base URL too, or leave "
                    "both empty to use the platform's endpoint.",
                )
            return cleaned
        try:
            check_endpoint(base_url, endpoint_policy())
        except EndpointRefused as exc:
            self.add_error("base_url", exc.message)
        keeps_key = self.instance.has_own_api_key and not cleaned.get("clear_api_key")
        kind = PROVIDERS.get(cleaned.get("provider") or "")
        if kind is not None and kind.needs_api_key and not (new_key or keeps_key):
            self.add_error(
                "api_key", f"An {kind.label} endpoint of your own needs its own API key."
            )
        return cleaned

    def save(self, commit: bool = True) -> Any:
        profile: ModelProfile = self.instance
        new_key = self.cleaned_data.get("api_key") or ""
        if self.cleaned_data.get("clear_api_key") or not profile.uses_own_endpoint:
            profile.set_own_api_key("")  # a key only ever serves the profile's own endpoint
        elif new_key:
            profile.set_own_api_key(new_key)
        return super().save(commit)
