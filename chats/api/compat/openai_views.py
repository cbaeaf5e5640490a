"""``/compat/openai/v1``: Chat Completions and the model list for the ``openai`` SDK."""

from __future__ import annotations

import time

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from chats.api import selectors
from chats.api.bridge import event_stream_response
from chats.api.compat import sending
from chats.api.compat.base import CompatView
from chats.api.compat.images import image_payload
from chats.api.compat.openai_chat import chat_call, completion, completion_chunks
from chats.api.compat.outcomes import CONVERSATION_HEADER, model_name
from chats.api.compat.protocols import OPENAI
from chats.api.compat.threads import thread_for
from chats.api.drf_internals import django_request


class ChatCompletionsView(CompatView):
    protocol = OPENAI

    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        call = chat_call(request.data, request.headers.get(self.protocol.conversation_header))
        principal = self.principal
        thread = thread_for(
            principal,
            call.turns,
            system=call.system,
            image=image_payload(call.image),
            conversation_id=call.conversation_id,
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        model = model_name(thread.conversation)
        wrapped = django_request(request)
        if call.stream:
            ack, items = sending.stream(wrapped, principal, thread)
            chunks = completion_chunks(
                ack,
                items,
                conversation=thread.conversation,
                model=model,
                include_usage=call.include_usage,
                error_body=self.protocol.error_body,
            )
            response = event_stream_response(wrapped, chunks)
            response[CONVERSATION_HEADER] = str(thread.conversation.pk)
            return response
        outcome = sending.answer(wrapped, principal, thread)
        return Response(completion(outcome, model, int(time.time())), headers=outcome.headers())


class ModelListView(CompatView):
    protocol = OPENAI

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        profiles = selectors.model_profiles(self.principal.tenant_id)
        data = [
            {"id": p.name, "object": "model", "created": 0, "owned_by": p.provider}
            for p in profiles
        ]
        return Response({"object": "list", "data": data})
