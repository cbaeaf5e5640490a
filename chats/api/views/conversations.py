"""Conversations: list, create, retrieve, rename, archive, delete, leave: thin adapters over
the services the web UI uses too (``chats.services.conversations``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.models.conversations import Conversation
from chats.api import selectors
from chats.api.pagination import ConversationCursor
from chats.api.serializers.conversations import (
    ConversationCreateSerializer,
    ConversationFilterSerializer,
    ConversationSerializer,
    ConversationUpdateSerializer,
)
from chats.api.services import continuation_summary_request
from chats.api.views.base import TenantAPIView, valid_id
from chats.selectors import conversation_for_member
from chats.services import conversation_create
from chats.services.conversations import (
    ConversationRejected,
    conversation_archive,
    conversation_delete,
    conversation_leave,
    conversation_update,
)

TAG = ["conversations"]


class ConversationListView(TenantAPIView):
    pagination_class = ConversationCursor
    serializer_class = ConversationSerializer

    @extend_schema(
        tags=TAG,
        operation_id="conversations_list",
        summary="The caller's conversations, most recently updated first",
        parameters=[ConversationFilterSerializer],
        responses=ConversationSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = self.query(ConversationFilterSerializer)
        queryset = selectors.conversations_of(
            self.principal.tenant_id,
            self.principal.user,
            archived=filters.get("archived"),
            search=filters.get("search", ""),
            updated_since=filters.get("updated_since"),
        )
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ConversationSerializer(page, many=True).data)

    @extend_schema(
        tags=TAG,
        operation_id="conversations_create",
        summary="Start a conversation (optionally continuing an earlier one)",
        request=ConversationCreateSerializer,
        responses={201: ConversationSerializer},
    )
    def post(self, request: Request) -> Response:
        data = self.body(ConversationCreateSerializer)
        principal = self.principal
        usernames: list[str] = data["participants"]
        members = selectors.members_by_username(principal.tenant_id, usernames)
        unknown = [name for name in usernames if name not in members]
        if unknown:
            raise ValidationError(
                {"participants": [f"Not a member of this tenant: {', '.join(unknown)}."]}
            )
        continues = self._continued(data.get("continues"))
        try:
            conversation = conversation_create(
                tenant=principal.tenant,
                created_by=principal.user,
                title=data["title"],
                participants=list(members.values()),
                continues=continues,
                carry_over_summary=data["carry_over_summary"],
            )
        except ConversationRejected as exc:
            raise ValidationError({"continues": [exc.message]}) from None
        continuation_summary_request(conversation)
        body = ConversationSerializer(selectors.conversation_detail(conversation)).data
        return Response(body, status=status.HTTP_201_CREATED)

    def _continued(self, conversation_id: int | None) -> Conversation | None:
        if conversation_id is None:
            return None
        principal = self.principal
        found = None
        if valid_id(conversation_id):
            found = conversation_for_member(
                principal.user, conversation_id, tenant_id=principal.tenant_id
            )
        if found is None:
            raise ValidationError({"continues": ["No such conversation."]})
        return found


class ConversationDetailView(TenantAPIView):
    serializer_class = ConversationSerializer

    @extend_schema(
        tags=TAG,
        operation_id="conversations_retrieve",
        summary="One conversation",
        responses=ConversationSerializer,
    )
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        return Response(ConversationSerializer(selectors.conversation_detail(conversation)).data)

    @extend_schema(
        tags=TAG,
        operation_id="conversations_update",
        summary="Rename and/or archive or restore",
        request=ConversationUpdateSerializer,
        responses=ConversationSerializer,
    )
    def patch(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        data = self.body(ConversationUpdateSerializer)
        conversation_update(conversation, title=data.get("title"), archived=data.get("archived"))
        return Response(ConversationSerializer(selectors.conversation_detail(conversation)).data)

    @extend_schema(
        tags=TAG,
        operation_id="conversations_destroy",
        summary="Delete, with its messages, summaries and turn records",
        description=(
            "Deleting removes the conversation for everyone in it: only its creator or a tenant "
            "admin may (403 otherwise). Other participants leave it instead "
            "(`POST /conversations/{id}/leave/`)."
        ),
        responses={
            204: OpenApiResponse(description="Deleted."),
            403: OpenApiResponse(description="Neither the creator nor a tenant admin."),
        },
    )
    def delete(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        principal = self.principal
        try:
            conversation_delete(conversation, by=principal.user, admin=principal.is_admin)
        except ConversationRejected as exc:
            raise PermissionDenied(exc.message) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationArchiveView(TenantAPIView):
    serializer_class = ConversationSerializer

    @extend_schema(
        tags=TAG,
        operation_id="conversations_archive",
        summary="Archive (idempotent)",
        request=None,
        responses={200: ConversationSerializer},
    )
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        conversation_archive(conversation)
        return Response(ConversationSerializer(selectors.conversation_detail(conversation)).data)


class ConversationLeaveView(TenantAPIView):
    @extend_schema(
        tags=TAG,
        operation_id="conversations_leave",
        summary="Leave (it leaves the caller's list; the others keep it)",
        description=(
            "The caller stops taking part: the conversation is no longer listed for them and "
            "they lose access; the other participants keep it with its history. The last "
            "participant to leave deletes it."
        ),
        request=None,
        responses={204: OpenApiResponse(description="Left.")},
    )
    def post(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        conversation_leave(conversation, user=self.principal.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
