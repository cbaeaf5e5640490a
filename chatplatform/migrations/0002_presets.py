"""Seed model profiles (current Claude models, a local Ollama model, the offline provider) and
the three preset policies (sliding window, rolling summary, hybrid)."""

from decimal import Decimal

from django.db import migrations

PROFILES = [
    # name, provider, model, window, max output, tokenizer, vision, prices in/out/cache read/write
    ("Claude Sonnet 4.5", "anthropic", "claude-sonnet-4-5", 200_000, 64_000, "anthropic", True,
     "3", "15", "0.30", "3.75"),
    ("Claude Haiku 4.5", "anthropic", "claude-haiku-4-5", 200_000, 64_000, "anthropic", True,
     "1", "5", "0.10", "1.25"),
    ("Claude Opus 4.5", "anthropic", "claude-opus-4-5", 200_000, 64_000, "anthropic", True,
     "5", "25", "0.50", "6.25"),
    ("Llama 3.2 (Ollama)", "openai", "llama3.2", 128_000, 8_192, "estimator", False,
     "0", "0", "0", "0"),
    ("Offline (built in)", "offline", "offline", 200_000, 8_192, "o200k_base", False,
     "0", "0", "0", "0"),
]

PRESETS = [
    ("Sliding window", "sliding_window",
     "The newest messages that fit, always the last 20 when they fit."),
    ("Rolling summary", "rolling_summary",
     "Summaries of older parts plus the messages after the last summary, verbatim."),
    ("Hybrid", "hybrid",
     "Summaries, user facts and older messages relevant to the new one, plus recent history."),
]


def forwards(apps, schema_editor):
    ModelProfile = apps.get_model("chatplatform", "ModelProfile")
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    offline = None
    for (name, provider, model, window, max_out, tokenizer, vision, p_in, p_out, p_cr,
         p_cw) in PROFILES:
        profile, _ = ModelProfile._base_manager.update_or_create(
            tenant=None,
            name=name,
            defaults=dict(
                provider=provider, model=model, context_window=window,
                max_output_tokens=max_out, tokenizer=tokenizer, supports_vision=vision,
                # Empty: the operator's endpoint (OPENAI_BASE_URL), like every shared profile.
                base_url="",
                price_input_per_mtok=Decimal(p_in), price_output_per_mtok=Decimal(p_out),
                price_cache_read_per_mtok=Decimal(p_cr), price_cache_write_per_mtok=Decimal(p_cw),
            ),
        )
        if provider == "offline":
            offline = profile
    for name, strategy, description in PRESETS:
        ContextPolicy._base_manager.update_or_create(
            tenant=None,
            name=name,
            defaults=dict(
                description=description, strategy=strategy, model_profile=offline,
                max_context_tokens=32_000, reserved_response_tokens=2_048,
                system_budget=2_000, facts_budget=1_000,
                summaries_budget=0 if strategy == "sliding_window" else 4_000,
                retrieval_budget=6_000 if strategy == "hybrid" else 0,
            ),
        )


def backwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ModelProfile = apps.get_model("chatplatform", "ModelProfile")
    ContextPolicy._base_manager.filter(tenant=None, name__in=[p[0] for p in PRESETS]).delete()
    ModelProfile._base_manager.filter(tenant=None, name__in=[p[0] for p in PROFILES]).delete()


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
