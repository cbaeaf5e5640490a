"""Messages: list, read one, and send one, getting the reply as JSON or as server-sent
events (``Accept: text/event-stream``)."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator
from typing import Any

from django.http import FileResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.exceptions import NotFound, Throttled, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.models.conversations import Conversation, Message
from chatplatform.spend_limits import QuotaExceeded
from chats.api import selectors
from chats.api.bridge import event_stream_response, run_async
from chats.api.drf_internals import django_request
from chats.api.errors import ApiError, SpendLimitReached
from chats.api.pagination import MessageCursor
from chats.api.renderers import EventStreamRenderer
from chats.api.replies import is_final, reply_after_send
from chats.api.schema import error_response
from chats.api.serializers.messages import (
    MAX_CLIENT_ID,
    CommandAnswerSerializer,
    MessageCreateSerializer,
    MessageExchangeSerializer,
    MessageSerializer,
    ServerSentEventSerializer,
)
from chats.api.streaming import command_events, reply_events, stream_grant, stream_timing
from chats.api.views.base import TenantAPIView, valid_id
from chats.image_files import image_response
from chats.replies import commands
from chats.replies.intake import SendRateLimited, Sent, user_message_send
from chats.selectors import message_by_client_id, message_with_image
from chats.services.messages import MessageRejected
from chats.socket_access import SocketGrant

TAG = ["messages"]
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: How long a request waits for its message to be accepted (stored, the runner started).
SEND_TIMEOUT_SECONDS = 30.0

SSE_DESCRIPTION = """\
With `Accept: application/json` (default) the request waits for the reply: 201 with the message
and its reply (complete, incomplete or failed); 202 when the reply is not finished within the
wait (`API_REPLY_WAIT_SECONDS`): fetch it later by id.

With `Accept: text/event-stream` the answer is a stream of server-sent events, the WebSocket
protocol's: `ack` first, then `reply`, `delta` (seq 1, 2, ...), and `done` or `error` last.
A retried request gets `ack` with `duplicate: true` and `reply_state`.

Idempotent by `client_id` or the `Idempotency-Key` header: a retried request returns the first
message (and its reply) with `duplicate: true` and status 200, and creates nothing new.
Messages per minute are limited by the tenant's policy (429 `rate_limited`). A monthly
spending limit of the tenant, the member or the API key that is reached refuses new messages
(429 `quota_exceeded`, `Retry-After`: when the month ends); one whose warning is reached adds
the `X-Spend-Warning` header (a `spend_warning` event after `ack` on the event stream). While the
reply service (Redis) is unreachable a send answers 503 `service_unavailable` with
`Retry-After` and stores nothing; send it again later with the same `client_id`.

A chat command (`/memories [page]`: the sender's saved facts, ten a page; `/help`: the
commands) is answered at once, without the model, and stores nothing: 200 with
`{type: "command", command, text, client_id}`, or one `command` event; a page that does not
exist is 400 `invalid_page`.
"""


RESPONSE_200 = (
    "JSON: a retried request, answered with the first message and its reply; or a chat "
    "command's answer. Event stream: the reply's events (ack, reply, delta, done or error), "
    "or a chat command's one event."
)
RESPONSE_200_JSON = PolymorphicProxySerializer(
    component_name="MessageExchangeOrCommand",
    serializers=[MessageExchangeSerializer, CommandAnswerSerializer],
    resource_type_field_name=None,
)


#: The header that carries a spending limit's warning on an accepted message.
SPEND_WARNING_HEADER = "X-Spend-Warning"


class RateLimited(Throttled):
    default_code = "rate_limited"


def rejected(exc: MessageRejected) -> ApiError:
    """A service rejection as an API error: 413 for too large, else 400."""
    if exc.code == "too_large":
        return ApiError(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            exc.code,
            exc.message,
            {"content": [exc.message]},
        )
    if exc.code == "invalid_image":
        field = "image"
    else:
        field = "reply_to" if "repl" in exc.message.lower() else "content"
    return ApiError(status.HTTP_400_BAD_REQUEST, exc.code, exc.message, {field: [exc.message]})


def exchange(
    message: Message, reply: Message | None, *, duplicate: bool, viewer: Any
) -> dict[str, Any]:
    """A message and its reply as ``viewer`` (the caller) sees them."""
    context = {"viewer": viewer}
    return {
        "message": MessageSerializer(message, context=context).data,
        "reply": MessageSerializer(reply, context=context).data if reply is not None else None,
        "duplicate": duplicate,
    }


class MessageListView(TenantAPIView):
    pagination_class = MessageCursor
    serializer_class = MessageSerializer

    def get_renderers(self) -> list[BaseRenderer]:
        if self.request is not None and self.request.method == "POST":
            return [JSONRenderer(), EventStreamRenderer()]
        return [JSONRenderer()]

    @extend_schema(
        tags=TAG,
        operation_id="messages_list",
        summary="The conversation's messages, oldest first (cursor by seq)",
        responses=MessageSerializer(many=True),
    )
    def get(self, request: Request, conversation_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        page = self.paginate_queryset(selectors.messages_of(conversation))
        context = {"viewer": self.principal.user}
        return self.get_paginated_response(MessageSerializer(page, many=True, context=context).data)

    @extend_schema(
        tags=TAG,
        operation_id="messages_create",
        summary="Send a message and get the reply (JSON or server-sent events)",
        description=SSE_DESCRIPTION,
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="Makes the send idempotent (1-64 characters); same as client_id.",
            )
        ],
        request=MessageCreateSerializer,
        responses={
            (201, "application/json"): OpenApiResponse(
                MessageExchangeSerializer, description="Stored, and the reply is final."
            ),
            (200, "application/json"): OpenApiResponse(
                RESPONSE_200_JSON,
                description=RESPONSE_200,
            ),
            (202, "application/json"): OpenApiResponse(
                MessageExchangeSerializer,
                description="Stored; the reply is still being generated.",
            ),
            (200, "text/event-stream"): OpenApiResponse(
                ServerSentEventSerializer,
                description=RESPONSE_200,
            ),
        },
    )
    def post(self, request: Request, conversation_id: int) -> StreamingHttpResponse | Response:
        conversation = self.conversation(conversation_id)
        data = self.body(MessageCreateSerializer)
        client_id = self._client_id(data.get("client_id"))
        if command := commands.command_name(data["content"]):
            return self._command(conversation, command, data["content"], client_id)
        # A retried request (the caller's own client id) is not counted against the rate.
        earlier = (
            message_by_client_id(conversation, self.principal.user, client_id)
            if client_id
            else None
        )
        send = functools.partial(
            user_message_send,
            conversation=conversation,
            user=self.principal.user,
            content=data["content"],
            client_id=client_id,
            reply_to_id=data.get("reply_to"),
            image=data.get("image"),
            counted=earlier is None,
            api_key_id=self.principal.key.pk if self.principal.key is not None else None,
        )
        try:
            if isinstance(request.accepted_renderer, EventStreamRenderer):
                events = reply_events(
                    send,
                    tenant_id=conversation.tenant_id,
                    conversation_id=conversation.pk,
                    grant=self._grant(conversation),
                    **stream_timing(),
                )
                return self._stream(events)
            sent = run_async(django_request(request), send, timeout=SEND_TIMEOUT_SECONDS)
        except SendRateLimited as exc:
            raise RateLimited(wait=exc.window_seconds, detail=exc.message) from None
        except QuotaExceeded as exc:
            raise SpendLimitReached(exc.message, exc.retry_after) from None
        except MessageRejected as exc:
            raise rejected(exc) from None
        return self._answer(sent)

    def _command(
        self, conversation: Conversation, command: str, content: str, client_id: str | None
    ) -> StreamingHttpResponse | Response:
        """A chat command's answer (the WebSocket's): JSON, or a one-event stream."""
        try:
            text = commands.command_answer(
                command, conversation.tenant_id, self.principal.user, content
            )
        except commands.CommandError as exc:
            raise ApiError(
                status.HTTP_400_BAD_REQUEST, exc.code, exc.message, {"content": [exc.message]}
            ) from None
        event = commands.command_event(command, text, client_id)
        if isinstance(self.request.accepted_renderer, EventStreamRenderer):
            return self._stream(command_events(event))
        return Response(event, status=status.HTTP_200_OK)

    def _client_id(self, from_body: str | None) -> str | None:
        header = self.request.headers.get(IDEMPOTENCY_HEADER)
        if header is not None and not 0 < len(header) <= MAX_CLIENT_ID:
            raise ValidationError(
                {IDEMPOTENCY_HEADER: [f"Must be 1 to {MAX_CLIENT_ID} characters."]}
            )
        if header is not None and from_body is not None and header != from_body:
            raise ValidationError({"client_id": [f"Differs from the {IDEMPOTENCY_HEADER} header."]})
        return from_body if from_body is not None else header

    def _answer(self, sent: Sent) -> Response:
        message, created = sent.message, sent.created
        reply = reply_after_send(django_request(self.request), sent)
        code: int
        if not is_final(reply):
            code = status.HTTP_202_ACCEPTED
        else:
            code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        exchanged = exchange(message, reply, duplicate=not created, viewer=self.principal.user)
        response = Response(exchanged, status=code)
        if (warning := sent.spend_warning) is not None:
            response[SPEND_WARNING_HEADER] = warning["message"]
        return response

    def _grant(self, conversation: Conversation) -> SocketGrant:
        """What opened this request's event stream: it ends when that credential does."""
        return stream_grant(django_request(self.request), self.principal, conversation)

    def _stream(self, events: AsyncGenerator[bytes, None]) -> StreamingHttpResponse:
        """The event stream's response; its first event (``ack``) is taken here, so that a
        send refused (rate limit, bad input) is answered with an HTTP error instead."""
        first = run_async(
            django_request(self.request), lambda: anext(events), timeout=SEND_TIMEOUT_SECONDS
        )
        return event_stream_response(django_request(self.request), _after(first, events))


async def _after(first: bytes, rest: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    """``first``, then the rest of the stream."""
    yield first
    try:
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()


class MessageDetailView(TenantAPIView):
    serializer_class = MessageSerializer

    @extend_schema(
        tags=TAG,
        operation_id="messages_retrieve",
        summary="One message (e.g. a reply announced by a 202)",
        responses=MessageSerializer,
    )
    def get(self, request: Request, conversation_id: int, message_id: int) -> Response:
        conversation = self.conversation(conversation_id)
        message = selectors.message_in(conversation, message_id) if valid_id(message_id) else None
        if message is None:
            raise NotFound("No such message.")
        return Response(MessageSerializer(message, context={"viewer": self.principal.user}).data)


class MessageImageView(TenantAPIView):
    # The image is sent as it was stored (its checked type), whatever the Accept header asks;
    # errors are JSON like everywhere in the API.

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        tags=TAG,
        operation_id="messages_image",
        summary="The image attached to a message",
        responses={
            (200, "image/*"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The image, of the type in the message's `image.media_type`.",
            ),
            404: error_response(
                404, "No such message, no image on it, or another tenant's: all alike."
            ),
        },
    )
    def get(self, request: Request, conversation_id: int, message_id: int) -> FileResponse:
        conversation = self.conversation(conversation_id)
        message = message_with_image(conversation, message_id)
        if message is None:
            raise NotFound("No such image.")
        return image_response(message.attachment, message.attachment_type, message.pk)
