"""``/compat/anthropic/v1``: Messages and their token count for the ``anthropic`` SDK."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chats.api.bridge import event_stream_response
from chats.api.compat import sending
from chats.api.compat.anthropic_messages import message, message_events, messages_call
from chats.api.compat.base import CompatView
from chats.api.compat.counting import prompt_tokens
from chats.api.compat.images import image_payload
from chats.api.compat.outcomes import CONVERSATION_HEADER, model_name
from chats.api.compat.protocols import ANTHROPIC
from chats.api.compat.threads import thread_for
from chats.api.drf_internals import django_request


class MessagesView(CompatView):
    protocol = ANTHROPIC

    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        call = messages_call(request.data)
        principal = self.principal
        thread = thread_for(
            principal,
            call.turns,
            system=call.system,
            image=image_payload(call.image),
            conversation_id=request.headers.get(self.protocol.conversation_header),
            idempotency_key=request.headers.get("Idempotency-Key"),
            offered=call.offered,
        )
        model = model_name(thread.conversation)
        wrapped = django_request(request)
        if call.stream:
            ack, items = sending.stream(wrapped, principal, thread)
            events = message_events(
                ack,
                items,
                conversation=thread.conversation,
                model=model,
                error_body=self.protocol.error_body,
            )
            response = event_stream_response(wrapped, events)
            response[CONVERSATION_HEADER] = str(thread.conversation.pk)
            return response
        outcome = sending.answer(wrapped, principal, thread)
        return Response(message(outcome, model), headers=outcome.headers())


class CountTokensView(CompatView):
    protocol = ANTHROPIC

    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response:
        call = messages_call(request.data, counting=True)
        tokens = prompt_tokens(
            self.principal,
            call.turns,
            system=call.system,
            conversation_id=request.headers.get(self.protocol.conversation_header),
            image=image_payload(call.image),
            offered=call.offered,
        )
        return Response({"input_tokens": tokens})
