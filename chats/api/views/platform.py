"""The caller, the tenant's active policy, and the model profiles (read-only)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.policies import active_policy
from chats.api import selectors
from chats.api.serializers.platform import (
    MeSerializer,
    ModelProfileListSerializer,
    ModelProfileSerializer,
    PolicySerializer,
)
from chats.api.views.base import TenantAPIView, valid_id

TAG = ["platform"]


class MeView(TenantAPIView):
    serializer_class = MeSerializer

    @extend_schema(tags=TAG, operation_id="me", summary="Who the caller is", responses=MeSerializer)
    def get(self, request: Request) -> Response:
        principal = self.principal
        tenant = principal.tenant
        return Response(
            MeSerializer(
                {
                    "tenant": {"id": tenant.pk, "name": tenant.name, "slug": tenant.slug},
                    "username": principal.user.username,
                    "is_admin": principal.is_admin,
                    "auth": "api_key" if principal.key is not None else "session",
                    "key_prefix": principal.key.prefix if principal.key is not None else None,
                }
            ).data
        )


class PolicyView(TenantAPIView):
    serializer_class = PolicySerializer

    @extend_schema(
        tags=TAG,
        operation_id="policy_active",
        summary="The tenant's active context policy",
        responses=PolicySerializer,
    )
    def get(self, request: Request) -> Response:
        return Response(PolicySerializer(active_policy(self.principal.tenant)).data)


class ModelProfileListView(TenantAPIView):
    serializer_class = ModelProfileListSerializer

    @extend_schema(
        tags=TAG,
        operation_id="model_profiles_list",
        summary="The tenant's model profiles and the shared ones",
        responses=ModelProfileListSerializer,
    )
    def get(self, request: Request) -> Response:
        profiles = selectors.model_profiles(self.principal.tenant_id)
        return Response({"results": ModelProfileSerializer(profiles, many=True).data})


class ModelProfileDetailView(TenantAPIView):
    serializer_class = ModelProfileSerializer

    @extend_schema(
        tags=TAG,
        operation_id="model_profiles_retrieve",
        summary="One model profile",
        responses=ModelProfileSerializer,
    )
    def get(self, request: Request, profile_id: int) -> Response:
        profile = (
            selectors.model_profile(self.principal.tenant_id, profile_id)
            if valid_id(profile_id)
            else None
        )
        if profile is None:
            raise NotFound("No such model profile.")
        return Response(ModelProfileSerializer(profile).data)
