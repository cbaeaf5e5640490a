"""Anthropic's Models API through the official SDK: what each model takes and supports.

``GET /v1/models`` (``client.models.list``) and ``GET /v1/models/{id}``
(``client.models.retrieve``) report, per model, its display name, ``max_input_tokens`` (the
context window), ``max_tokens`` (the largest ``max_tokens`` a request may ask for), the
``capabilities`` object and its ``lifecycle`` (``active``, ``deprecated``, ``retired``).
:class:`ModelFacts` is that report in plain values; the platform decides what to store.

The SDK's retries are off and every call carries an explicit timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import anthropic

from .capabilities import supports

#: Every lifecycle stage: without ``retired`` the list leaves retired models out, and the
#: platform could not tell a retired model from one the list merely forgot.
Lifecycle = Literal["active", "deprecated", "retired"]
ALL_LIFECYCLES: list[Lifecycle] = ["active", "deprecated", "retired"]
PAGE_SIZE = 100


@dataclass(frozen=True)
class ModelFacts:
    """One model as the Models API reports it (``None``: the API did not say)."""

    id: str
    display_name: str
    lifecycle: str = "active"
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def retired(self) -> bool:
        return self.lifecycle == "retired"

    @property
    def supports_vision(self) -> bool:
        return supports(self.capabilities, "image_input")


def model_facts(info: Any) -> ModelFacts:
    """The plain view of an SDK ``ModelInfo``."""
    capabilities = info.capabilities.model_dump(mode="json") if info.capabilities else {}
    return ModelFacts(
        id=info.id,
        display_name=info.display_name or info.id,
        lifecycle=getattr(info, "lifecycle", None) or "active",
        context_window=info.max_input_tokens,
        max_output_tokens=info.max_tokens,
        capabilities=capabilities,
    )


class AnthropicModels:
    """Reads the Models API with the operator's key (``timeout`` in seconds per request)."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 10.0,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        self.timeout = timeout
        self._client = client or anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=self._timeout(),
            # A redirect could carry the key to a host nobody checked.
            http_client=anthropic.DefaultHttpxClient(follow_redirects=False),
        )

    def _timeout(self) -> anthropic.Timeout:
        return anthropic.Timeout(self.timeout, connect=min(5.0, self.timeout))

    def list(self) -> list[ModelFacts]:
        """Every model the key can see, in every lifecycle stage (all pages)."""
        page = self._client.models.list(
            limit=PAGE_SIZE, lifecycle=ALL_LIFECYCLES, timeout=self._timeout()
        )
        return [model_facts(info) for info in page]

    def retrieve(self, model_id: str) -> ModelFacts:
        return model_facts(self._client.models.retrieve(model_id, timeout=self._timeout()))

    def close(self) -> None:
        self._client.close()
