"""The model-facing fact tools, as provider-neutral JSON-schema definitions.

Executing them (storing and reading ``UserFact`` rows) belongs to the ``memory`` app, which
hands an executor to :func:`chatplatform.core.llm.tool_loop.stream_with_tools`.
"""

from __future__ import annotations

from .base import ToolSpec

SAVE_USER_FACT = ToolSpec(
    name="save_user_fact",
    description=(
        "Save one durable fact about the user (preference, background, ongoing project) so "
        "it is remembered in later conversations. Use a short third-person sentence. Pass "
        "`key` to replace an earlier fact on the same subject (e.g. 'home_city')."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "The fact, e.g. 'The user lives in Kyiv.'",
            },
            "key": {
                "type": "string",
                "maxLength": 64,
                "description": "Optional subject key; a new fact with the same key replaces "
                "the old one.",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)

GET_USER_FACTS = ToolSpec(
    name="get_user_facts",
    description="Return every fact saved about the user, newest first.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)

FACT_TOOLS: tuple[ToolSpec, ...] = (SAVE_USER_FACT, GET_USER_FACTS)
