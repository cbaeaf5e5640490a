"""The model-facing fact tools, as provider-neutral JSON-schema definitions.

Executing them (storing and reading ``UserFact`` rows) belongs to the ``memory`` app, which
hands an executor to :func:`chatplatform.core.llm.tool_loop.stream_with_tools`.
"""

from __future__ import annotations

from chatplatform.core.memory.kinds import FACT, MEMORY_KIND_NAMES

from .base import ToolSpec

SAVE_USER_FACT = ToolSpec(
    name="save_user_fact",
    description=(
        "Save one durable memory of the user so it is remembered in later conversations. "
        "A fact (background, ongoing project): a short third-person sentence; pass `key` to "
        "replace an earlier fact on the same subject (e.g. 'home_city'). A standing "
        "instruction on how to answer from now on (kind `instruction`, e.g. 'Always answer in "
        "Spanish') or a preference (kind `preference`, e.g. 'I prefer minimal dependencies'): "
        "save it in the user's own words, as they said it, without a key; a later one on the "
        "same matter replaces the earlier."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "The memory: a fact, e.g. 'The user lives in Kyiv.', or the "
                "user's instruction or preference in their own words.",
            },
            "kind": {
                "type": "string",
                "enum": list(MEMORY_KIND_NAMES),
                "default": FACT,
                "description": "What it is: a fact about the user (the default), a standing "
                "instruction on how to answer, or a preference.",
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
    description="Return every memory saved of the user (facts, standing instructions and "
    "preferences, each with its kind), newest first.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)

FACT_TOOLS: tuple[ToolSpec, ...] = (SAVE_USER_FACT, GET_USER_FACTS)
