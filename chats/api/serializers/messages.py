"""Messages: representation, sending, and the exchange (message + reply) a send returns."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatplatform.models.conversations import Message
from chats.api.serializers.fields import TextField
from chats.images import ALLOWED_TYPES, MAX_IMAGE_BASE64_CHARS

MAX_CLIENT_ID = 64


class MessageImageSerializer(serializers.Serializer):
    """The image attached to a message (its bytes are at ``url``)."""

    media_type = serializers.CharField(help_text="The type found in the image's own header.")
    size = serializers.IntegerField(help_text="The image's size in bytes.")
    url = serializers.CharField(
        help_text="Where the image is served (GET with the same API key; 404 for anyone "
        "who cannot see the conversation)."
    )


class ImageInputSerializer(serializers.Serializer):
    """An image sent with a message, as the WebSocket frame carries it."""

    # Fields built in get_fields: a field named ``data`` would shadow ``Serializer.data``.

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "media_type": serializers.ChoiceField(
                choices=list(ALLOWED_TYPES), help_text="Must match the image's own header."
            ),
            "data": TextField(
                max_length=MAX_IMAGE_BASE64_CHARS,
                help_text="The image as base64 (no data: prefix), at most 5 MB decoded.",
            ),
        }


class MessageSerializer(serializers.ModelSerializer):
    author: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        read_only=True, slug_field="username", allow_null=True
    )
    reply_to = serializers.IntegerField(source="reply_to_id", read_only=True, allow_null=True)
    answers = serializers.IntegerField(
        source="answers_id",
        read_only=True,
        allow_null=True,
        help_text="For assistant replies: the user message answered.",
    )
    image = serializers.SerializerMethodField(help_text="The attached image, or null.")
    client_id = serializers.SerializerMethodField(
        help_text="The client id its sender sent it with: shown only to that sender (null on "
        "other members' messages)."
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "author",
            "content",
            "image",
            "status",
            "client_id",
            "reply_to",
            "answers",
            "token_count",
            "token_counter",
            "error_code",
            "error_message",
            "edited_at",
            "created_at",
            "tool_calls",
            "tool_results",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "tool_calls": {
                "help_text": "A reply's calls of tools its client runs ([{id, name, input}]), "
                "or null."
            },
            "tool_results": {
                "help_text": "A tool message's results of those calls "
                "([{tool_use_id, content, is_error}]), or null."
            },
        }

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_client_id(self, message: Message) -> str | None:
        """A client id is its sender's: the viewer (``context["viewer"]``, the caller) sees
        it on their own messages only, so no one can reuse or squat another's ids."""
        viewer = self.context.get("viewer")
        mine = viewer is not None and message.author_id == getattr(viewer, "pk", None)
        return message.client_id if mine else None

    @extend_schema_field(MessageImageSerializer(allow_null=True))
    def get_image(self, message: Message) -> dict[str, Any] | None:
        if not message.attachment:
            return None
        url = reverse("api:message-image", args=[message.conversation_id, message.pk])
        return {
            "media_type": message.attachment_type,
            "size": message.attachment_bytes,
            "url": url,
        }


class MessageCreateSerializer(serializers.Serializer):
    content = TextField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The message text (at most the policy's max_message_chars, and never more "
        "than the server's CHAT_MAX_MESSAGE_CHARS: 413 beyond). May be empty when an image "
        "is attached.",
    )
    image = ImageInputSerializer(
        required=False,
        allow_null=True,
        help_text="An image sent with the text: PNG, JPEG, GIF or WebP of at most 5 MB, checked "
        "by its own header (400 `invalid_image` otherwise). A model that can see images gets "
        "it as an image block; any other model is told an image was attached, its type and "
        "size.",
    )
    client_id = TextField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=MAX_CLIENT_ID,
        help_text="Makes the send idempotent (same as the Idempotency-Key header).",
    )
    reply_to = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=2**62,
        help_text="Id of a message of this conversation that this one quotes.",
    )


class MessageEditSerializer(serializers.Serializer):
    content = TextField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="The new text of the message, checked as a new message's text; the earlier "
        "text is kept as a revision.",
    )


class MessageExchangeSerializer(serializers.Serializer):
    message = MessageSerializer(help_text="The stored user message.")
    reply = MessageSerializer(
        allow_null=True,
        help_text="The assistant reply as stored: complete, incomplete or failed; or "
        "streaming / null when the answer is 202 (fetch it later by id).",
    )
    duplicate = serializers.BooleanField(
        help_text="True when this request repeated an earlier one (same client id): "
        "nothing new was created."
    )


class CommandAnswerSerializer(serializers.Serializer):
    """The answer to a chat command (``/memories [page]``): nothing is stored, the model is
    not asked."""

    type = serializers.CharField(help_text='Always "command".')
    command = serializers.CharField(help_text='The command answered, e.g. "memories".')
    text = serializers.CharField(help_text="The answer, as the chat shows it.")
    client_id = serializers.CharField(
        allow_null=True, help_text="The client id sent with the command, or null."
    )


class ServerSentEventSerializer(serializers.Serializer):
    """One event of a reply stream: ``event: <name>`` and a ``data:`` line of JSON."""

    # Fields built in get_fields: a field named ``data`` would shadow ``Serializer.data``.

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "event": serializers.ChoiceField(
                choices=["ack", "reply_state", "reply", "delta", "done", "error", "command"],
                help_text="ack first; done or error last; a chat command's answer is the "
                "only event of its stream.",
            ),
            "data": serializers.CharField(
                help_text="The event as one JSON object whose type equals the event name: "
                "ack {client_id, message_id, seq, duplicate}; reply {message_id, answers, "
                "offline}; delta {message_id, seq, text}; done {message_id, status, last_seq, "
                "usage}; error {code, message, message_id, status, partial, retryable}; "
                "reply_state {message_id, answers, status, content, error_code, error_message}; "
                "command {command, text, client_id}."
            ),
        }
