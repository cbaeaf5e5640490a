"""The Models API of the fake Anthropic server: ``GET /v1/models`` and ``GET /v1/models/{id}``,
with payloads shaped as the API sends them (``ModelInfo``: id, display name, lifecycle,
``max_input_tokens``, ``max_tokens``, every capability key), pagination by ``limit`` and
``after_id``, and the ``lifecycle[]`` filter (``active`` and ``deprecated`` when omitted)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

_STRATEGIES = ("clear_thinking_20251015", "clear_tool_uses_20250919", "compact_20260112")


def _yes(flag: bool = True) -> dict[str, bool]:
    return {"supported": flag}


def model_payload(
    model_id: str,
    display_name: str,
    *,
    window: int = 1_000_000,
    max_tokens: int = 128_000,
    lifecycle: str = "active",
    image_input: bool = True,
    compaction: bool = True,
    line: str | None = None,
    created_at: str = "2026-10-07T00:00:00Z",
) -> dict[str, Any]:
    """One model as ``GET /v1/models`` lists it."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": display_name,
        "created_at": created_at,
        "lifecycle": lifecycle,
        "deprecated_at": None if lifecycle == "active" else "2026-11-01T00:00:00Z",
        "retires_at": None,
        "line": line or model_id.split("-")[1],
        "max_input_tokens": window,
        "max_tokens": max_tokens,
        "capabilities": {
            "batch": _yes(),
            "citations": _yes(),
            "code_execution": _yes(),
            "context_management": {
                "supported": compaction,
                **{name: _yes(compaction) for name in _STRATEGIES},
            },
            "effort": {
                "supported": True,
                **{level: _yes() for level in ("low", "medium", "high", "max", "xhigh")},
            },
            "image_input": _yes(image_input),
            "pdf_input": _yes(),
            "server_tools": {
                "supported": True,
                "code_execution": _yes(),
                "web_search": _yes(),
            },
            "structured_outputs": _yes(),
            "thinking": {
                "supported": True,
                "types": {
                    "adaptive": _yes(),
                    "between_tools": _yes(),
                    "disabled": _yes(),
                    "enabled": _yes(False),
                },
            },
        },
    }


def default_models() -> list[dict[str, Any]]:
    return [
        model_payload("claude-sonnet-5-5", "Claude Sonnet 5.5"),
        model_payload("claude-haiku-5-5", "Claude Haiku 5.5"),
        model_payload(
            "claude-haiku-4-5-20251001",
            "Claude Haiku 4.5",
            window=200_000,
            max_tokens=64_000,
            compaction=False,
            created_at="2025-10-01T00:00:00Z",
        ),
    ]


def not_found(model_id: str) -> JSONResponse:
    body = {
        "type": "error",
        "error": {"type": "not_found_error", "message": f"model: {model_id}"},
        "request_id": "req_fake",
    }
    return JSONResponse(body, status_code=404, headers={"request-id": "req_fake"})


def list_response(models: list[dict[str, Any]], request: Request) -> Response:
    wanted = request.query_params.getlist("lifecycle[]") or ["active", "deprecated"]
    listed = [m for m in models if m["lifecycle"] in wanted]
    after = request.query_params.get("after_id")
    if after:
        ids = [m["id"] for m in listed]
        listed = listed[ids.index(after) + 1 :] if after in ids else []
    limit = int(request.query_params.get("limit", 20))
    page, more = listed[:limit], len(listed) > limit
    return JSONResponse(
        {
            "data": page,
            "has_more": more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
    )


def retrieve_response(models: list[dict[str, Any]], model_id: str) -> Response:
    for model in models:
        if model["id"] == model_id:
            return JSONResponse(model)
    return not_found(model_id)


def window_of(models: list[dict[str, Any]], model_id: str) -> int | None:
    """The model's ``max_input_tokens`` (None: not in the catalogue, no limit enforced)."""
    return next((m["max_input_tokens"] for m in models if m["id"] == model_id), None)
