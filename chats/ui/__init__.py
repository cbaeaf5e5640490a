"""The web UI: conversations, the chat view, the context meter, memories and summaries."""
