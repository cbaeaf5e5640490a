"""Regenerating the last reply and editing-and-resending the last user message: the REST
adapters of :mod:`chats.replies.revise` (the WebSocket's ``regenerate`` and ``edit`` frames);
and reading a message's versions, the earlier ones kept as revisions."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chats.api import selectors
from chats.api.bridge import run_async
from chats.api.drf_internals import django_request
from chats.api.errors import ApiError
from chats.api.replies import is_final, wait_for_reply
from chats.api.schema import error_response
from chats.api.serializers.messages import MessageEditSerializer, MessageExchangeSerializer
from chats.api.views.base import TenantAPIView
from chats.api.views.messages import SEND_TIMEOUT_SECONDS, TAG, RateLimited, exchange, rejected
from chats.replies.intake import SendRateLimited
from chats.replies.revise import Resent, exchange_edit, exchange_regenerate
from chats.selectors import message_versions
from chats.services.messages import MessageRejected
from chats.services.revisions import RevisionRefused

#: The HTTP status of each refusal of :class:`RevisionRefused`.
REFUSED_STATUS = {
    "not_found": status.HTTP_404_NOT_FOUND,
    "forbidden": status.HTTP_403_FORBIDDEN,
    "not_last": status.HTTP_409_CONFLICT,
    "busy": status.HTTP_409_CONFLICT,
}

RESPONSES = {
    200: OpenApiResponse(MessageExchangeSerializer, description="The new reply is final."),
    202: OpenApiResponse(
        MessageExchangeSerializer,
        description="The new reply is still being written: fetch it later by id.",
    ),
    403: error_response(
        403,
        "Another member's message: only its author edits it; only its author or a tenant "
        "admin regenerates its reply.",
    ),
    404: error_response(404, "No such message, or another conversation's or tenant's: alike."),
    409: error_response(
        409, "`not_last`: only the last exchange changes; `busy`: its reply is being written."
    ),
    429: error_response(429, "The user's message rate (a new reply counts as a message)."),
}

SEMANTICS = """\
The reply replaced is not deleted: it is kept as a revision of the message (for audits) and is
never sent to the model again. The new reply has the same id as the one it replaces. The request
waits for it as a send does (`API_REPLY_WAIT_SECONDS`): 200 when it is final, else 202.
Refused while the reply is being written (409 `busy`) and for any but the last exchange
(409 `not_last`)."""


class RevisionView(TenantAPIView):
    def _answer(self, request: Request, start: Any) -> Response:
        try:
            resent: Resent = run_async(django_request(request), start, timeout=SEND_TIMEOUT_SECONDS)
        except SendRateLimited as exc:
            raise RateLimited(wait=exc.window_seconds, detail=exc.message) from None
        except MessageRejected as exc:
            raise rejected(exc) from None
        except RevisionRefused as exc:
            raise ApiError(REFUSED_STATUS[exc.code], exc.code, exc.message) from None
        tenant_id, message = resent.user_message.tenant_id, resent.user_message
        wait = float(settings.API_REPLY_WAIT_SECONDS)
        try:
            reply = run_async(
                django_request(request),
                lambda: wait_for_reply(resent.runner, tenant_id, message.pk, timeout=wait),
                timeout=wait + 10,
            )
        except concurrent.futures.TimeoutError:
            reply = selectors.reply_to(tenant_id, message.pk)
        code = status.HTTP_200_OK if is_final(reply) else status.HTTP_202_ACCEPTED
        exchanged = exchange(message, reply, duplicate=False, viewer=self.principal.user)
        return Response(exchanged, status=code)


class MessageRegenerateView(RevisionView):
    @extend_schema(
        tags=TAG,
        operation_id="messages_regenerate",
        summary="Write a new reply in place of the conversation's last reply",
        description=SEMANTICS,
        request=None,
        responses=RESPONSES,
    )
    def post(self, request: Request, conversation_id: int, message_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        return self._answer(
            request,
            lambda: exchange_regenerate(
                conversation=conversation,
                user=self.principal.user,
                reply_id=message_id,
                admin=self.principal.is_admin,
            ),
        )


class MessageEditView(RevisionView):
    @extend_schema(
        tags=TAG,
        operation_id="messages_edit",
        summary="Edit the conversation's last user message (yours) and get a new reply",
        description=SEMANTICS.replace("The reply replaced", "The earlier text and the reply"),
        request=MessageEditSerializer,
        responses=RESPONSES,
    )
    def post(self, request: Request, conversation_id: int, message_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        content = self.body(MessageEditSerializer)["content"]
        return self._answer(
            request,
            lambda: exchange_edit(
                conversation=conversation,
                user=self.principal.user,
                message_id=message_id,
                content=content,
            ),
        )


class MessageVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 for the first version written.")
    content = serializers.CharField()
    status = serializers.CharField()
    written_at = serializers.DateTimeField()
    current = serializers.BooleanField(help_text="The version the conversation shows now.")
    replaced = serializers.CharField(
        help_text="How an earlier version was replaced: `edited`, `regenerated` or `resent` "
        "(its message was edited); empty for the current one."
    )
    replaced_at = serializers.DateTimeField(allow_null=True)


class MessageVersionListSerializer(serializers.Serializer):
    versions = MessageVersionSerializer(many=True)


class MessageVersionsView(TenantAPIView):
    @extend_schema(
        tags=TAG,
        operation_id="messages_versions",
        summary="Every version of a message: the earlier ones (edited or regenerated), then "
        "the current",
        description="Earlier versions are read-only and never sent to the model again.",
        responses={
            200: MessageVersionListSerializer,
            404: error_response(404, "No such message, or another conversation's or tenant's."),
        },
    )
    def get(self, request: Request, conversation_id: int, message_id: int) -> Response:
        versions = message_versions(
            self.principal.user, conversation_id, message_id, tenant_id=self.principal.tenant_id
        )
        if versions is None:
            raise NotFound("No such message.")
        return Response({"versions": [v.as_dict() for v in versions]})
