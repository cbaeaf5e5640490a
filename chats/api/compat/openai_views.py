"""``/compat/openai/v1``: Chat Completions, Responses (create, retrieve, delete) and the model
list for the ``openai`` SDK."""

from __future__ import annotations

import functools
import time
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from chatplatform.models.conversations import OpenAIResponse
from chats.api import selectors
from chats.api.bridge import event_stream_response
from chats.api.compat import sending
from chats.api.compat.base import CompatView
from chats.api.compat.images import image_payload
from chats.api.compat.openai_chat import chat_call, completion, completion_chunks
from chats.api.compat.openai_responses import response_events, response_object
from chats.api.compat.openai_responses_input import ResponsesCall, responses_call
from chats.api.compat.outcomes import CONVERSATION_HEADER, model_name, outcome_of
from chats.api.compat.protocols import OPENAI
from chats.api.compat.threads import invalid, thread_for
from chats.api.drf_internals import django_request
from chats.api.errors import ApiError
from chats.api.principal import ApiPrincipal
from chats.selectors import openai_response_for
from chats.services.openai_responses import openai_response_create, openai_response_delete


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
            offered=call.offered,
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


def _conversation_named(principal: ApiPrincipal, call: ResponsesCall) -> Any:
    """The conversation a Responses request names: its previous response's (the key's user's,
    stored; 400 otherwise, as OpenAI answers), else the header's or metadata's, else None."""
    if call.previous_response_id is None:
        return call.conversation_id
    previous = openai_response_for(principal.tenant_id, principal.user, call.previous_response_id)
    if previous is None:
        message = f"Previous response with id '{call.previous_response_id}' not found."
        raise ApiError(
            status.HTTP_400_BAD_REQUEST,
            "previous_response_not_found",
            message,
            {"previous_response_id": [message]},
        )
    if call.conversation_id is not None and str(call.conversation_id) != str(
        previous.conversation_id
    ):
        raise invalid(
            "previous_response_id continues another conversation than the one named.",
            "previous_response_id",
        )
    return previous.conversation_id


class ResponsesView(CompatView):
    protocol = OPENAI

    @extend_schema(exclude=True)
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        call = responses_call(request.data, request.headers.get(self.protocol.conversation_header))
        principal = self.principal
        created_at = timezone.now()
        thread = thread_for(
            principal,
            call.turns,
            system=call.system,
            image=image_payload(call.image),
            conversation_id=_conversation_named(principal, call),
            idempotency_key=request.headers.get("Idempotency-Key"),
            all_new=call.previous_response_id is not None,
            offered=call.offered,
        )
        conversation = thread.conversation
        record = functools.partial(
            openai_response_create,
            conversation,
            principal.user,
            model=model_name(conversation),
            created_at=created_at,
            stored=call.store,
            previous_response_id=call.previous_response_id or "",
            instructions=call.instructions or "",
            metadata=call.metadata,
        )
        wrapped = django_request(request)
        if call.stream:
            ack, items = sending.stream(wrapped, principal, thread)
            made = record(user_message_id=int(ack["message_id"]))
            response = event_stream_response(wrapped, response_events(made, ack, items))
            response[CONVERSATION_HEADER] = str(conversation.pk)
            return response
        outcome = sending.answer(wrapped, principal, thread)
        made = record(user_message_id=outcome.message_id)
        return Response(response_object(made, outcome), headers=outcome.headers())


class ResponseView(CompatView):
    protocol = OPENAI

    def _record(self, response_id: str) -> OpenAIResponse:
        principal = self.principal
        found = openai_response_for(principal.tenant_id, principal.user, response_id)
        if found is None:
            raise ApiError(
                status.HTTP_404_NOT_FOUND,
                "not_found",
                f"Response with id '{response_id}' not found.",
            )
        return found

    @extend_schema(exclude=True)
    def get(self, request: Request, response_id: str) -> Response:
        if request.query_params.get("stream") not in (None, "false"):
            raise invalid("stream is not supported when retrieving a response.", "stream")
        found = self._record(response_id)
        outcome = outcome_of(found.conversation, found.user_message_id)
        return Response(response_object(found, outcome), headers=outcome.headers())

    @extend_schema(exclude=True)
    def delete(self, request: Request, response_id: str) -> Response:
        found = self._record(response_id)
        openai_response_delete(found)
        return Response({"id": found.public_id, "object": "response", "deleted": True})
