"""The SDK-compatible API: the OpenAI and Anthropic SDKs pointed at the platform
(``/compat/openai/v1``, ``/compat/anthropic/v1``) get its context management. Thin adapters
over the same send service and reply runner as the REST API and the WebSocket
(:func:`chats.replies.intake.user_message_send`); what differs is each protocol's framing
(:mod:`.protocols`) and how a request names its conversation (:mod:`.threads`)."""
