"""Model profiles: what a model can take and what it costs."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.core import checks
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import DatabaseError, models

from chatplatform.core.llm.providers import (
    PROVIDERS,
    ProviderKind,
    UnknownProvider,
    provider_choices,
    provider_kind,
)
from chatplatform.encryption import decrypt, encrypt
from chatplatform.tenancy.scoping import TenantScopedManager


def _long_price(what: str) -> models.DecimalField:
    return models.DecimalField(
        f"long-context price of {what} per Mtok",
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="Used above the long-context threshold; empty: the ordinary price.",
    )


class ModelProfile(models.Model):
    """A model a policy can use. ``tenant`` NULL: a platform-wide profile every tenant sees.

    ``tokenizer`` names the token counter whose counts match this model: a public BPE
    (``o200k_base``, ``cl100k_base``), ``anthropic`` (the count_tokens API), or ``estimator``.
    Prices are in USD per million tokens. ``calibration_*`` hold the running ratio of the
    provider-reported prompt tokens to our estimate (Welford mean and M2).
    """

    tenant = models.ForeignKey(
        "chatplatform.Tenant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Leave empty to offer this model to every tenant.",
    )
    name = models.CharField(max_length=100, help_text="Display name, e.g. 'Claude Sonnet 4.5'.")
    provider = models.CharField(
        max_length=16,
        choices=provider_choices(),
        help_text="Who runs the model. Offline is built in: it answers without a model and "
        "costs nothing.",
    )
    model = models.CharField(max_length=100, help_text="The model id the provider's API expects.")
    base_url = models.URLField(
        blank=True,
        help_text=(
            "Empty: the platform's endpoint and credentials. A tenant's own endpoint, e.g. "
            "https://llm.example.com/v1, gets only this profile's own API key, never the "
            "platform's, and only on a host the operator allows."
        ),
    )
    api_key_encrypted = models.TextField(
        blank=True,
        default="",
        editable=False,
        help_text="The tenant's own API key for its own endpoint, encrypted (Fernet).",
    )
    context_window = models.PositiveIntegerField(
        validators=[MinValueValidator(512)],
        help_text="The most tokens the model reads and writes in one turn; policies using "
        "it must fit inside.",
    )
    max_output_tokens = models.PositiveIntegerField(
        validators=[MinValueValidator(16)],
        help_text="The longest reply the model can write, in tokens.",
    )
    tokenizer = models.CharField(
        max_length=32,
        default="estimator",
        help_text="How tokens are counted for this model: a public tokenizer such as "
        "o200k_base counts exactly, 'anthropic' asks the provider, 'estimator' estimates "
        "(with a safety margin that leaves a little less room).",
    )
    supports_vision = models.BooleanField(
        default=False,
        help_text="The model can look at images sent in the chat; otherwise it is only told "
        "that an image was attached.",
    )
    supports_tools = models.BooleanField(
        default=True,
        help_text="The model can use tools, such as saving facts about the user.",
    )
    price_input_per_mtok = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal(0),
        help_text="USD per million prompt tokens read without the cache.",
    )
    price_output_per_mtok = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal(0),
        help_text="USD per million tokens the model writes.",
    )
    price_cache_read_per_mtok = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal(0),
        help_text="USD per million prompt tokens re-read from the provider's cache (usually "
        "a tenth of the input price).",
    )
    price_cache_write_per_mtok = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal(0),
        help_text="USD per million prompt tokens written to the cache for 5 minutes "
        "(Anthropic: 1.25x the input price).",
    )
    price_cache_write_1h_per_mtok = models.DecimalField(
        "price of cache writes, 1-hour lifetime, per Mtok",
        max_digits=10,
        decimal_places=4,
        default=Decimal(0),
        help_text="Anthropic: 2x the input price (the other write price is for 5 minutes).",
    )
    cache_min_tokens = models.PositiveIntegerField(
        "minimum cacheable prompt",
        default=1024,
        help_text=(
            "Shortest prefix the provider caches (Anthropic: 1,024 to 4,096 tokens by model); "
            "a shorter one is not cached, so no breakpoint is spent on it."
        ),
    )
    long_context_threshold_tokens = models.PositiveIntegerField(
        "long-context threshold",
        null=True,
        blank=True,
        help_text=(
            "Prompt tokens (input, cache reads and cache writes) above which the provider bills "
            "the whole request at the long-context prices below (e.g. Claude Haiku 5.5: "
            "100,000). Empty: the model has no long-context tier."
        ),
    )
    price_long_input_per_mtok = _long_price("input")
    price_long_output_per_mtok = _long_price("output")
    price_long_cache_read_per_mtok = _long_price("cache reads")
    price_long_cache_write_per_mtok = _long_price("cache writes, 5-minute lifetime,")
    price_long_cache_write_1h_per_mtok = _long_price("cache writes, 1-hour lifetime,")
    prices_unknown = models.BooleanField(
        "prices to be set",
        default=False,
        help_text=(
            "Added from the provider's model list with no documented prices: its costs read "
            "zero until an admin sets them (changing a price clears this)."
        ),
    )
    capabilities = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "What the provider says the model supports, as its Models API reports it (image "
            "input, thinking, context management strategies such as server-side compaction). "
            "Filled in when profiles are updated from the provider; empty means unknown."
        ),
    )
    is_active = models.BooleanField(default=True)
    calibration_samples = models.PositiveIntegerField(default=0, editable=False)
    calibration_ratio_mean = models.FloatField(default=1.0, editable=False)
    calibration_ratio_m2 = models.FloatField(default=0.0, editable=False)
    calibration_updated_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = TenantScopedManager(include_shared=True)

    class Meta:
        ordering = ["provider", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "name"], name="modelprofile_unique_name_per_tenant"
            ),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(tenant__isnull=True),
                name="modelprofile_unique_shared_name",
            ),
            models.CheckConstraint(
                condition=models.Q(max_output_tokens__lt=models.F("context_window")),
                name="modelprofile_output_below_window",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def provider_kind(self) -> ProviderKind:
        """The registry entry of the profile's provider (raises :class:`UnknownProvider` for
        a name that is not registered: saving refuses one, the start-up check reports one)."""
        return provider_kind(self.provider)

    def clean_fields(self, exclude: Iterable[str] | None = None) -> None:
        """A provider that is not registered is refused with the names that are."""
        skipped = set(exclude or ())
        unknown: dict[str, list[ValidationError]] = {}
        if "provider" not in skipped and self.provider:
            try:
                provider_kind(self.provider)
            except UnknownProvider as exc:
                unknown["provider"] = [ValidationError(str(exc), code="unknown_provider")]
                skipped.add("provider")
        try:
            super().clean_fields(exclude=skipped)
        except ValidationError as exc:
            raise ValidationError({**exc.error_dict, **unknown}) from None
        if unknown:
            raise ValidationError(unknown)

    @property
    def uses_own_endpoint(self) -> bool:
        """A tenant's profile that names its own endpoint (gets only its own key)."""
        return self.tenant_id is not None and bool(self.base_url)

    @property
    def has_own_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    def own_api_key(self) -> str:
        """The tenant's own API key, decrypted (empty when none is set)."""
        return decrypt(self.api_key_encrypted)

    def set_own_api_key(self, raw: str) -> None:
        """Store ``raw`` encrypted (empty clears it); the caller saves the profile."""
        self.api_key_encrypted = encrypt(raw)

    @property
    def has_long_context_tier(self) -> bool:
        return self.long_context_threshold_tokens is not None

    def is_long_context(self, prompt_tokens: int) -> bool:
        """Whether a request of ``prompt_tokens`` (input + cache reads + cache writes) is
        billed at the long-context prices."""
        threshold = self.long_context_threshold_tokens
        return threshold is not None and prompt_tokens > threshold

    def cost_usd(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_ttl: str = "5m",
    ) -> Decimal:
        """Cost of one call; ``input_tokens`` excludes cache reads and writes, which are
        priced for the cache lifetime ``cache_ttl`` the request asked for.

        The one place a call is priced. A request whose prompt (all three kinds of input
        tokens) is above the long-context threshold pays the long-context price on every
        token, output included, as Anthropic bills it; a long-context price left empty
        falls back to the ordinary one."""
        long = self.is_long_context(input_tokens + cache_read_tokens + cache_write_tokens)

        def price(ordinary: Decimal, long_price: Decimal | None) -> Decimal:
            return long_price if long and long_price is not None else ordinary

        one_hour = cache_ttl == "1h"
        write_price = price(
            self.price_cache_write_1h_per_mtok if one_hour else self.price_cache_write_per_mtok,
            self.price_long_cache_write_1h_per_mtok
            if one_hour
            else self.price_long_cache_write_per_mtok,
        )
        million = Decimal(1_000_000)
        return (
            Decimal(input_tokens) * price(self.price_input_per_mtok, self.price_long_input_per_mtok)
            + Decimal(output_tokens)
            * price(self.price_output_per_mtok, self.price_long_output_per_mtok)
            + Decimal(cache_read_tokens)
            * price(self.price_cache_read_per_mtok, self.price_long_cache_read_per_mtok)
            + Decimal(cache_write_tokens) * write_price
        ) / million


@checks.register(checks.Tags.database)
def check_profile_providers(databases: Iterable[str] | None = None, **kwargs: Any) -> list[Any]:
    """Model profiles whose provider is not registered: an error, listed by profile (the
    check runs where a database is named, e.g. by ``migrate`` at release)."""
    errors: list[Any] = []
    for database in databases or ():
        try:
            unknown = list(
                ModelProfile._base_manager.using(database)
                .exclude(provider__in=list(PROVIDERS))
                .order_by("pk")
                .values_list("pk", "name", "provider")
            )
        except DatabaseError:  # not migrated yet: no profiles to check
            continue
        errors.extend(
            checks.Error(
                f"model profile {pk} ({name!r}) names the provider {provider!r}, which is not "
                "registered",
                hint=f"Registered providers: {', '.join(PROVIDERS)}. Change the profile's "
                "provider or register the provider in chatplatform.core.llm.providers.",
                obj=f"ModelProfile {pk}",
                id="chatplatform.E001",
            )
            for pk, name, provider in unknown
        )
    return errors
