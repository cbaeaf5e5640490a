"""User memories (facts, standing instructions and preferences, told apart by ``kind``): the
caller's own, or (admin callers, ``?user=<username>``) any member's."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from chats.api import selectors
from chats.api.errors import ApiError
from chats.api.serializers.facts import (
    FactChangeSerializer,
    FactCreateSerializer,
    FactListQuerySerializer,
    FactListSerializer,
    FactOwnerQuerySerializer,
    FactSerializer,
    FactTextSerializer,
)
from chats.api.views.base import TenantAPIView, valid_id
from memory.models import FactSource, UserFact
from memory.selectors import MAX_PAGE_SIZE, current_facts, fact_get
from memory.services import (
    FactNotFound,
    FactRejected,
    fact_delete,
    fact_save_detailed,
    fact_set_shareable,
    fact_update,
)

TAG = ["facts"]
OWNER = [FactOwnerQuerySerializer]


def rejected(exc: FactRejected) -> ApiError:
    if exc.code == "disabled":
        return ApiError(status.HTTP_409_CONFLICT, exc.code, exc.message)
    if exc.code == "not_member":
        return ApiError(status.HTTP_404_NOT_FOUND, "not_found", "No such user in this tenant.")
    field = "key" if exc.code == "invalid_key" else "text"
    return ApiError(status.HTTP_400_BAD_REQUEST, exc.code, exc.message, {field: [exc.message]})


class FactsView(TenantAPIView):
    # Shared by the facts views: whose facts the request manages.

    serializer_class = FactSerializer

    def owner(self) -> Any:
        """The caller, or with ``?user=`` (admin callers only) that member of the tenant."""
        username = self.query(FactOwnerQuerySerializer).get("user")
        principal = self.principal
        if not username or username == principal.user.username:
            return principal.user
        if not principal.is_admin:
            raise PermissionDenied("Only admin keys may manage other users' facts.")
        user = selectors.member_by_username(principal.tenant_id, username)
        if user is None:
            raise NotFound("No such user in this tenant.")
        return user

    def fact(self, owner: Any, fact_id: int) -> UserFact:
        if not valid_id(fact_id):
            raise NotFound("No such fact.")
        try:
            return fact_get(self.principal.tenant_id, owner, fact_id)
        except UserFact.DoesNotExist:
            raise NotFound("No such fact.") from None


class FactListView(FactsView):
    @extend_schema(
        tags=TAG,
        operation_id="facts_list",
        summary="Current memories, newest first (at most 100; `?kind=` for one kind)",
        parameters=[FactListQuerySerializer],
        responses=FactListSerializer,
    )
    def get(self, request: Request) -> Response:
        kind = self.query(FactListQuerySerializer).get("kind")
        facts = current_facts(
            self.principal.tenant_id,
            self.owner(),
            limit=MAX_PAGE_SIZE,
            kinds=None if kind is None else [kind],
        )
        return Response({"results": FactSerializer(facts, many=True).data})

    @extend_schema(
        tags=TAG,
        operation_id="facts_create",
        summary="Save a memory (identical current one: returned, 200)",
        description="`kind` (default `fact`): a fact, or a standing `instruction` or "
        "`preference` (an unknown kind: 400). A keyed fact replaces the key's current value, "
        "an instruction or preference the current one on the same matter (kept as history); "
        "over the policy's limit the oldest of the same section are evicted. A memory is "
        "private unless "
        "`shareable` is true: private facts are used only in the owner's one-to-one "
        "conversations, never in a reply other members of a group chat read.",
        parameters=OWNER,
        request=FactCreateSerializer,
        responses={
            201: OpenApiResponse(FactSerializer, description="Saved."),
            200: OpenApiResponse(FactSerializer, description="Already current; unchanged."),
            409: OpenApiResponse(
                description="Facts (or standing instructions) are turned off for this tenant."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        owner = self.owner()
        data = self.body(FactCreateSerializer)
        try:
            saved = fact_save_detailed(
                self.principal.tenant_id,
                owner,
                data["text"],
                data.get("key"),
                FactSource.API,
                shareable=data.get("shareable"),
                kind=data["kind"],
            )
        except FactRejected as exc:
            raise rejected(exc) from None
        code = status.HTTP_201_CREATED if saved.created else status.HTTP_200_OK
        return Response(FactSerializer(saved.fact).data, status=code)


class FactDetailView(FactsView):
    @extend_schema(
        tags=TAG,
        operation_id="facts_retrieve",
        summary="One fact (current or an earlier version)",
        parameters=OWNER,
        responses=FactSerializer,
    )
    def get(self, request: Request, fact_id: int) -> Response:
        return Response(FactSerializer(self.fact(self.owner(), fact_id)).data)

    @extend_schema(
        tags=TAG,
        operation_id="facts_update",
        summary="Change a current fact's text or whether it is shareable",
        description="A new text becomes a new version (a new id) that supersedes this one; "
        "the response is the new version. `shareable` alone changes the setting in place "
        "(same id).",
        parameters=OWNER,
        request=FactChangeSerializer,
        responses=FactSerializer,
    )
    def patch(self, request: Request, fact_id: int) -> Response:
        owner = self.owner()
        data = self.body(FactChangeSerializer)
        if not valid_id(fact_id):
            raise NotFound("No such fact.")
        tenant_id = self.principal.tenant_id
        try:
            if "text" in data:
                fact = fact_update(
                    tenant_id,
                    owner,
                    fact_id,
                    data["text"],
                    FactSource.API,
                    shareable=data.get("shareable"),
                )
            else:
                fact = fact_set_shareable(tenant_id, owner, fact_id, data["shareable"])
        except FactNotFound:
            raise NotFound("No such current fact.") from None
        except FactRejected as exc:
            raise rejected(exc) from None
        return Response(FactSerializer(fact).data)

    @extend_schema(
        tags=TAG,
        operation_id="facts_destroy",
        summary="Forget a current fact (with its earlier versions)",
        parameters=OWNER,
        responses={204: OpenApiResponse(description="Forgotten.")},
    )
    def delete(self, request: Request, fact_id: int) -> Response:
        owner = self.owner()
        if not valid_id(fact_id):
            raise NotFound("No such fact.")
        try:
            fact_delete(self.principal.tenant_id, owner, fact_id)
        except FactNotFound:
            raise NotFound("No such current fact.") from None
        except FactRejected as exc:
            raise rejected(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class FactByKeyView(FactsView):
    @extend_schema(
        tags=TAG,
        operation_id="facts_upsert_by_key",
        summary="Set the current value of a keyed fact (insert or replace)",
        parameters=OWNER,
        request=FactTextSerializer,
        responses={
            201: OpenApiResponse(FactSerializer, description="Saved (new or replacing)."),
            200: OpenApiResponse(FactSerializer, description="Same value; unchanged."),
            409: OpenApiResponse(description="Facts are turned off for this tenant."),
        },
    )
    def put(self, request: Request, key: str) -> Response:
        owner = self.owner()
        data = self.body(FactTextSerializer)
        try:
            saved = fact_save_detailed(
                self.principal.tenant_id,
                owner,
                data["text"],
                key,
                FactSource.API,
                shareable=data.get("shareable"),
            )
        except FactRejected as exc:
            raise rejected(exc) from None
        code = status.HTTP_201_CREATED if saved.created else status.HTTP_200_OK
        return Response(FactSerializer(saved.fact).data, status=code)
