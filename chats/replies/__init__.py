"""The reply pipeline: accept a user message, assemble, stream the model's answer to every
socket of the conversation, store the reply and the turn's usage."""
