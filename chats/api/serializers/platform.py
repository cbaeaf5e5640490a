"""The caller, the active context policy and the model profiles (read-only)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatplatform.models import ContextPolicy, ModelProfile


class MeSerializer(serializers.Serializer):
    tenant = serializers.DictField(child=serializers.JSONField(), help_text="{id, name, slug}")
    username = serializers.CharField()
    is_admin = serializers.BooleanField()
    auth = serializers.ChoiceField(choices=["api_key", "session"])
    key_prefix = serializers.CharField(allow_null=True)


class ModelProfileSerializer(serializers.ModelSerializer):
    shared = serializers.SerializerMethodField()

    class Meta:
        model = ModelProfile
        fields = [
            "id",
            "name",
            "provider",
            "model",
            "context_window",
            "max_output_tokens",
            "tokenizer",
            "supports_vision",
            "supports_tools",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "price_cache_read_per_mtok",
            "price_cache_write_per_mtok",
            "is_active",
            "shared",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField(help_text="A platform-wide profile."))
    def get_shared(self, profile: ModelProfile) -> bool:
        return profile.tenant_id is None


class ModelProfileListSerializer(serializers.Serializer):
    results = ModelProfileSerializer(many=True)


class PolicySerializer(serializers.ModelSerializer):
    model_profile = ModelProfileSerializer(read_only=True)
    is_preset = serializers.BooleanField(read_only=True)

    class Meta:
        model = ContextPolicy
        exclude = ["tenant"]
        read_only_fields = [
            f.name for f in ContextPolicy._meta.get_fields() if getattr(f, "concrete", False)
        ]
